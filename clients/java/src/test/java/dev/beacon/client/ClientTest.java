package dev.beacon.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import beacon.v1.registry.RegistryGrpc;
import beacon.v1.registry.RegistryOuterClass.HealthFilter;
import beacon.v1.registry.RegistryOuterClass.NodeInfo;
import beacon.v1.registry.RegistryOuterClass.UnregisterRequest;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Java client against real beacons, started and stopped, killed or hung by the tests. */
class ClientTest {
  private static final Map<String, Object> LEASES = Map.of("lease_ms", 2000, "id_reuse_delay_ms", 3000);

  private static Watch.Event next(Watch w, Duration d) {
    Watch.Event e = w.next(d);
    assertNotNull(e, "no event within " + d);
    return e;
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aHealthChangeIsReportedAtOnceNotAtTheNextReport() throws Exception {
    // A lease of a minute: the next report is twenty seconds away.
    try (Beacons b = new Beacons(1, Map.of("lease_ms", 60000));
        BeaconClient client = b.client(0);
        Watch w = client.watch(List.of("HEALTHY"), HealthFilter.FILTER_SERVING);
        Registration reg = client.register("HEALTHY", "10.0.1.9:8080", BeaconClient.RegisterOptions.defaults())) {
      assertEquals(Watch.Kind.ADDED, next(w, Duration.ofSeconds(5)).kind());
      long started = System.nanoTime();
      reg.setHealth(Registration.Health.CRITICAL, "database unreachable");
      Watch.Event gone = next(w, Duration.ofSeconds(10));
      long tookMs = (System.nanoTime() - started) / 1_000_000;
      assertEquals(Watch.Kind.REMOVED, gone.kind());
      assertEquals("database unreachable", gone.node().getHealth().getNote());
      assertTrue(tookMs < 10_000, "told in " + tookMs + " ms");
      reg.setHealth(Registration.Health.PASSING, "");
      assertEquals(Watch.Kind.ADDED, next(w, Duration.ofSeconds(10)).kind());
    }
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aLoneBeaconRegistersDiscoversNumbersAndConfigures() throws Exception {
    try (Beacons b = new Beacons(1, Map.of("lease_ms", 2000));
        BeaconClient client = b.client(0)) {
      try (Watch w = client.watch(List.of("LOGIC"), HealthFilter.FILTER_SERVING)) {
        Registration reg =
            client.register("LOGIC", "10.0.1.1:8080", BeaconClient.RegisterOptions.defaults().withMetadata("{\"zone\":\"a\"}"));
        Watch.Event e = next(w, Duration.ofSeconds(5));
        assertEquals(Watch.Kind.ADDED, e.kind());
        assertEquals(reg.nodeId(), e.node().getNodeId());
        assertEquals("{\"zone\":\"a\"}", e.node().getMetadata());
        List<NodeInfo> listed = client.nodes("LOGIC", HealthFilter.FILTER_ANY, 0);
        assertEquals(1, listed.size());
        // Held over several leases by the keep-alive alone.
        Thread.sleep(3 * reg.lease().toMillis());
        assertTrue(reg.holds(), "the lease lapsed: " + reg.lost().getNow(""));

        client.createSequence("orders", 0, 0);
        try (Sequence seq = client.sequence("orders")) {
          long last = 0;
          for (int i = 0; i < 2000; i++) {
            long n = seq.next();
            assertTrue(n > last, n + " after " + last);
            last = n;
          }
        }

        try (ConfigWatch cw = client.configWatch(List.of("cluster/"))) {
          long rev = client.configPut("cluster/limits", "{\"rps\": 10}".getBytes(StandardCharsets.UTF_8), null);
          ConfigWatch.Event ce = cw.next(Duration.ofSeconds(5));
          assertNotNull(ce);
          assertEquals("cluster/limits", ce.document().getKey());
          assertEquals(rev, ce.document().getRevision());
          assertThrows(
              BeaconException.FailedPrecondition.class,
              () -> client.configPut("cluster/limits", new byte[] {1}, rev - 1));
          long async = client.configPutAsync("cluster/other", new byte[] {2}, null).get(10, TimeUnit.SECONDS);
          assertTrue(async > rev);
        }
        reg.close();
        Watch.Event gone = next(w, Duration.ofSeconds(5));
        assertEquals(Watch.Kind.REMOVED, gone.kind());
        assertEquals(reg.nodeId(), gone.node().getNodeId());
      }
    }
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void refusalsAreTypedExceptions() throws Exception {
    try (Beacons b = new Beacons(1, Map.of());
        BeaconClient client = BeaconClient.builder(b.addrs).retryFor(Duration.ofMillis(500)).build()) {
      BeaconException.NotFound nf = assertThrows(BeaconException.NotFound.class, () -> client.sequence("no-such-sequence"));
      assertEquals("UNKNOWN_SEQUENCE", nf.reason());
      assertEquals(30, nf.code());
      client.createSequence("once", 0, 10);
      assertThrows(BeaconException.AlreadyExists.class, () -> client.createSequence("once", 0, 20));
      assertThrows(
          BeaconException.InvalidArgument.class,
          () -> client.register("LOGIC", "not an address", BeaconClient.RegisterOptions.defaults()));
      try (Registration reg = client.register("LOGIC", "10.0.5.1:8080", BeaconClient.RegisterOptions.defaults())) {
        UnregisterRequest req =
            UnregisterRequest.newBuilder()
                .setNodeId(reg.nodeId())
                .setTerm(reg.fencingToken().term())
                .setIndex(reg.fencingToken().index() + 7)
                .build();
        BeaconException.LeaseLost lost =
            assertThrows(
                BeaconException.LeaseLost.class,
                () -> client.call((ch, o) -> RegistryGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).unregister(req)));
        assertEquals("NOT_HOLDER", lost.reason());
        assertTrue(reg.holds(), "an unregister by another token changed nothing");
      }
      BeaconException.TooLarge large =
          assertThrows(BeaconException.TooLarge.class, () -> client.configPut("cluster/big", new byte[5 << 20], null));
      assertTrue(large.getMessage().contains("max_frame_bytes"), large.getMessage());
      client.configPut("cluster/small", new byte[] {1}, null);
      List<Integer> ports = Beacons.freePorts(2);
      try (BeaconClient nobody =
          BeaconClient.builder(List.of("127.0.0.1:" + ports.get(0), "127.0.0.1:" + ports.get(1)))
              .retryFor(Duration.ofSeconds(30))
              .build()) {
        long started = System.nanoTime();
        assertThrows(BeaconException.Unavailable.class, () -> nobody.nodes("", HealthFilter.FILTER_ANY, 0));
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(10), "nothing listening is said at once");
      }
      assertThrows(IllegalArgumentException.class, () -> BeaconClient.builder(List.of()).build());
    }
  }

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void aLeaseAndAWatchHoldThroughALeaderKill() throws Exception {
    try (Beacons b = new Beacons(3, LEASES);
        BeaconClient client = b.client(0)) {
      CompletableFuture<String> lost = new CompletableFuture<>();
      try (Registration reg =
              client.register("LOGIC", "10.0.2.1:8080", BeaconClient.RegisterOptions.defaults().onLost(lost::complete));
          Watch w = client.watch(List.of("LOGIC"), HealthFilter.FILTER_SERVING)) {
        assertEquals(Watch.Kind.PRESENT, next(w, Duration.ofSeconds(5)).kind());
        client.createSequence("ids", 0, 100);
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        try (Sequence seq = client.sequence("ids")) {
          Runnable take =
              () -> {
                for (int i = 0; i < 200; i++) {
                  assertTrue(seen.add(seq.next()), "a number twice");
                }
              };
          take.run();
          b.kill(b.leader());
          List<Registration> made = new ArrayList<>();
          for (int i = 0; i < 3; i++) {
            made.add(client.register("LOGIC", "10.0.2." + (i + 2) + ":8080", BeaconClient.RegisterOptions.defaults()));
          }
          take.run();
          for (Registration r : made) {
            Watch.Event e = next(w, Duration.ofSeconds(10));
            assertEquals(Watch.Kind.ADDED, e.kind());
            assertEquals(r.nodeId(), e.node().getNodeId());
          }
          assertTrue(w.resumes() >= 1, "the watch resumed");
          assertEquals(0, w.resyncs(), "and never listed again");
          assertEquals(null, w.next(Duration.ofMillis(500)), "no change beyond those made");
          Thread.sleep(3 * reg.lease().toMillis());
          assertFalse(lost.isDone(), "the lease was lost: " + lost.getNow(""));
          assertTrue(reg.holds());
          made.forEach(Registration::close);
        }
      }
    }
  }

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void aStoppedFirstBeaconCostsAFreshClientNoWait() throws Exception {
    try (Beacons b = new Beacons(3, LEASES)) {
      int follower = (b.leader() + 1) % 3;
      b.stop(follower);
      try (BeaconClient fresh = b.client(follower)) {
        long started = System.nanoTime();
        try (Registration reg = fresh.register("LOGIC", "10.0.7.2:8080", BeaconClient.RegisterOptions.defaults())) {
          long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
          assertTrue(took < 2000, "a fresh client took " + took + " ms past the stopped first beacon");
          Thread.sleep(3 * reg.lease().toMillis());
          assertTrue(reg.holds(), "the lease holds");
        }
      } finally {
        b.cont(follower);
      }
    }
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void snowflakeIdsAreUniqueAndDecodeToTheNodeId() throws Exception {
    try (Beacons b = new Beacons(1, Map.of("lease_ms", 2000));
        BeaconClient client = b.client(0);
        Registration reg =
            client.register("ORDERS", "10.0.3.1:8080", BeaconClient.RegisterOptions.defaults().withSnowflake())) {
      Snowflake gen = new Snowflake(reg);
      Set<Long> seen = new HashSet<>();
      long last = 0;
      for (int i = 0; i < 5000; i++) {
        long id = gen.next(Duration.ofSeconds(3));
        assertTrue(seen.add(id) && id > last, id + " after " + last);
        assertEquals(reg.nodeId(), Snowflake.worker(id));
        last = id;
      }
    }
  }

  @Test
  void hysteresisReportsAStatusOnceItHeld() {
    Checker.Hysteresis h = new Checker.Hysteresis(3);
    List<Boolean> got = new ArrayList<>();
    Registration.Health c = Registration.Health.CRITICAL;
    Registration.Health p = Registration.Health.PASSING;
    for (Registration.Health s : List.of(c, c, p, c, c, c, c)) {
      got.add(h.observe(s));
    }
    assertEquals(List.of(false, false, false, false, false, true, false), got);
  }
}
