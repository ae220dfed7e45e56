package dev.beacon.client;

import beacon.v1.registry.RegistryOuterClass.HealthFilter;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/** The Java client's quick start (README.md): register, check, discover, number, configure. */
public final class QuickStart {
  public static void main(String[] args) throws Exception {
    // Every beacon of the cluster, or any of them (BEACON_ENDPOINTS, as nebcli reads it): any
    // beacon takes any call, and the client moves past one that is down or hung.
    String endpoints = System.getenv().getOrDefault("BEACON_ENDPOINTS", "127.0.0.1:16000");
    try (BeaconClient client = BeaconClient.builder(Arrays.asList(endpoints.split(","))).build();
        // This service's own port: what it registers, and what others reach it at.
        ServerSocket server = new ServerSocket(0)) {
      String addr = "127.0.0.1:" + server.getLocalPort();

      // A node ID, unique while the lease holds, renewed on a thread of its own.
      try (Registration reg =
          client.register(
              "LOGIC",
              addr,
              BeaconClient.RegisterOptions.defaults()
                  .onLost(why -> System.err.println("lease lost: stop using the node ID: " + why)))) {
        System.out.println("node id " + reg.nodeId() + " fencing token " + reg.fencingToken());

        // Its health, from a check beside it: while its port does not open it is critical.
        reg.runChecks(List.of(Check.tcp(addr, Duration.ofSeconds(1))), Duration.ofSeconds(1), 3);

        // Who else is alive: the current set, then each change once, across leader changes.
        try (Watch peers = client.watch(List.of("LOGIC"), HealthFilter.FILTER_SERVING)) {
          Watch.Event first = peers.next(Duration.ofSeconds(10));
          System.out.println(first.kind() + " " + first.node().getNodeId() + " " + first.node().getAddr());
        }

        // Numbers from a sequence (made once, usually by an operator), from a double buffer.
        try {
          client.createSequence("orders", 0, 0);
        } catch (BeaconException.AlreadyExists made) {
          // Made before.
        }
        try (Sequence orders = client.sequence("orders")) {
          System.out.println("order " + orders.next());
        }

        // A config document every service of the cluster reads.
        long rev = client.configPut("cluster/log_level", "info".getBytes(StandardCharsets.UTF_8), null);
        String level = client.configGet("cluster/log_level", false).get(0).getValue().toStringUtf8();
        System.out.println("log_level " + level + " at revision " + rev);
      }
    }
  }
}
