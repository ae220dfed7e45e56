package dev.beacon.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import beacon.v1.tasks.TasksOuterClass.TaskInfo;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Slots and task queues through the Java library, against real beacons. */
class WorkTest {
  private static final Map<String, Object> LEASES = Map.of("lease_ms", 2000, "id_reuse_delay_ms", 3000);

  private static void until(Duration d, String what, BooleanSupplier cond) throws InterruptedException {
    long end = System.nanoTime() + d.toNanos();
    while (System.nanoTime() < end) {
      if (cond.getAsBoolean()) {
        return;
      }
      Thread.sleep(20);
    }
    throw new AssertionError("within " + d + ": " + what);
  }

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void aSlotGoesToTheStandbyWhenItsHolderEnds() throws Exception {
    try (Beacons b = new Beacons(3, LEASES);
        BeaconClient client = b.client(0)) {
      client.createSlotGroup("robots", "ROBOT", 1);
      client.addSlotResource("arm-0", "robots", 0);
      Registration first = client.register("ROBOT", "10.0.3.1:9000", BeaconClient.RegisterOptions.defaults());
      try (Assignments heldA = client.assignments(first)) {
        until(Duration.ofSeconds(10), "the slot and its resource go to the first", () ->
            heldA.slots().containsKey("robots") && heldA.resources().containsKey("arm-0"));
        var granted = heldA.slots().get("robots");
        try (Registration standby = client.register("ROBOT", "10.0.3.2:9000", BeaconClient.RegisterOptions.defaults());
            Assignments heldB = client.assignments(standby)) {
          Thread.sleep(500);
          assertTrue(heldB.slots().isEmpty(), "the standby holds nothing while the holder lives");
          b.kill(b.leader());
          first.close();
          until(Duration.ofSeconds(15), "the slot and its resource go to the standby", () ->
              heldB.slots().containsKey("robots") && heldB.resources().containsKey("arm-0"));
          List<Assignments.Kind> told = new ArrayList<>();
          Assignments.Event e;
          while ((e = heldB.next(Duration.ofMillis(300))) != null) {
            told.add(e.kind());
          }
          assertTrue(told.contains(Assignments.Kind.SLOT_GRANTED) && told.contains(Assignments.Kind.ADDED), told.toString());
          var now = heldB.slots().get("robots");
          assertTrue(
              new Registration.FencingToken(granted.getTerm(), granted.getIndex())
                      .compareTo(new Registration.FencingToken(now.getTerm(), now.getIndex()))
                  < 0,
              "the standby's token is the later one");
        }
      }
    }
  }

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void aLockHasOneHolderAtATimeWithRisingTokens() throws Exception {
    try (Beacons b = new Beacons(3, LEASES);
        BeaconClient client = b.client(0);
        BeaconClient other = b.client(1)) {
      Lock first = client.lock("ledger", "10.0.4.1:9000", "{\"who\":\"first\"}", Duration.ofSeconds(10));
      assertEquals("lock.ledger", first.registration().nodeType());
      BeaconException.DeadlineExceeded waited =
          assertThrows(
              BeaconException.DeadlineExceeded.class,
              () -> other.lock("ledger", "10.0.4.2:9000", "{\"who\":\"second\"}", Duration.ofSeconds(1)));
      assertTrue(waited.getMessage().contains("another contender holds it"), waited.getMessage());
      var next = java.util.concurrent.CompletableFuture.supplyAsync(
          () -> other.lock("ledger", "10.0.4.2:9000", "{\"who\":\"second\"}", Duration.ofSeconds(20)));
      Thread.sleep(500);
      assertTrue(!next.isDone(), "the second waits while the first holds the lock");
      b.kill(b.leader());
      first.close();
      assertEquals("the lock was released", first.lost().get(5, TimeUnit.SECONDS));
      try (Lock second = next.get(30, TimeUnit.SECONDS)) {
        assertTrue(first.token().compareTo(second.token()) < 0, first.token() + " then " + second.token());
        assertTrue(!second.lost().isDone());
      }
      assertThrows(IllegalArgumentException.class, () -> client.lock("no spaces", "10.0.4.1:9000", "", Duration.ofSeconds(1)));
      client.createSlotGroup("robots", "ROBOT", 2);
      IllegalStateException taken =
          assertThrows(IllegalStateException.class, () -> client.lock("robots", "10.0.4.1:9000", "", Duration.ofSeconds(1)));
      assertTrue(taken.getMessage().contains("it is not lock `robots`"), taken.getMessage());
    }
  }

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void aWorkerRunsEveryTaskOnceAndResultsComeBack() throws Exception {
    try (Beacons b = new Beacons(3, LEASES);
        BeaconClient client = b.client(0)) {
      Tasks tasks = client.tasks();
      tasks.createQueue("thumbs", Duration.ofSeconds(5), 0);
      List<String> ran = Collections.synchronizedList(new ArrayList<>());
      try (Registration reg = client.register("THUMBS", "10.0.4.1:9000", BeaconClient.RegisterOptions.defaults());
          Tasks.Worker worker =
              tasks.worker(
                  reg,
                  List.of("thumbs"),
                  4,
                  task -> {
                    ran.add(task.getName());
                    String payload = task.getPayload().toStringUtf8();
                    if (payload.equals("bad")) {
                      throw new Tasks.TaskFailure("cannot read it", false);
                    }
                    return payload.toUpperCase().getBytes(StandardCharsets.UTF_8);
                  })) {
        for (int i = 0; i < 20; i++) {
          tasks.submit("thumbs", "img-" + i, ("photo " + i).getBytes(StandardCharsets.UTF_8));
        }
        tasks.submit("thumbs", "img-bad", "bad".getBytes(StandardCharsets.UTF_8));
        for (int i = 0; i < 20; i++) {
          if (i == 10) {
            b.kill(b.leader());
          }
          TaskInfo t = tasks.waitFor("thumbs", "img-" + i, Duration.ofSeconds(20)).get(30, TimeUnit.SECONDS);
          assertEquals("completed", t.getState());
          assertEquals("PHOTO " + i, t.getResult().toStringUtf8());
        }
        TaskInfo bad = tasks.waitFor("thumbs", "img-bad", Duration.ofSeconds(20)).get(30, TimeUnit.SECONDS);
        assertEquals("failed", bad.getState());
        assertTrue(bad.getError().contains("cannot read it"), bad.getError());
        List<String> want = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
          want.add("img-" + i);
        }
        want.add("img-bad");
        List<String> got = new ArrayList<>(ran);
        Collections.sort(got);
        Collections.sort(want);
        assertEquals(want, got, "every task ran once");
        ExecutionException missing =
            assertThrows(
                ExecutionException.class,
                () -> tasks.waitFor("thumbs", "no-such-task", Duration.ofSeconds(5)).get(10, TimeUnit.SECONDS));
        assertNotNull(missing.getCause());
        assertTrue(missing.getCause() instanceof BeaconException.NotFound, missing.getCause().toString());
      }
    }
  }
}
