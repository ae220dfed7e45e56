package dev.beacon.client;

import beacon.v1.Beacon;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Real beacon processes for the tests: n beacons on free loopback ports (quorum mode from
 * 3), tick 100 ms, each from its own config file and data directory. The binary is
 * $BEACON_BIN, else the repository's target/debug/beacon.
 */
final class Beacons implements AutoCloseable {
  final List<String> addrs = new ArrayList<>();
  private final List<Process> procs = new ArrayList<>();
  private final List<Path> configs = new ArrayList<>();
  private final Path dir;

  Beacons(int n, Map<String, Object> extra) throws IOException, InterruptedException {
    dir = Files.createTempDirectory("beacon-java-test");
    List<Integer> ports = freePorts(n);
    for (int p : ports) {
      addrs.add("127.0.0.1:" + p);
    }
    for (int i = 0; i < n; i++) {
      StringBuilder json = new StringBuilder("{");
      json.append("\"cluster\": \"javatest\", \"node\": \"").append(addrs.get(i)).append("\", ");
      json.append("\"beacon\": [");
      for (int j = 0; j < n; j++) {
        json.append(j > 0 ? ", " : "").append('"').append(addrs.get(j)).append('"');
      }
      json.append("], \"tick_ms\": 100, \"admin\": \"off\", ");
      json.append("\"data_dir\": \"").append(dir.resolve("data-" + ports.get(i))).append('"');
      for (Map.Entry<String, Object> e : extra.entrySet()) {
        json.append(", \"").append(e.getKey()).append("\": ").append(e.getValue());
      }
      json.append('}');
      Path config = dir.resolve("beacon-" + ports.get(i) + ".json");
      Files.writeString(config, json);
      configs.add(config);
      procs.add(null);
      start(i);
    }
    for (int p : ports) {
      waitPort(p);
    }
    leader();
  }

  static String binary() {
    String bin = System.getenv("BEACON_BIN");
    if (bin != null && !bin.isEmpty()) {
      return bin;
    }
    Path p = Path.of("../../target/debug/beacon").toAbsolutePath().normalize();
    if (!Files.exists(p)) {
      throw new IllegalStateException("no beacon binary at " + p + ": build it (cargo build) or set BEACON_BIN");
    }
    return p.toString();
  }

  void start(int i) throws IOException {
    ProcessBuilder pb = new ProcessBuilder(binary(), "--config", configs.get(i).toString());
    pb.redirectErrorStream(true);
    pb.redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("beacon-" + i + ".log").toFile()));
    pb.environment().put("RUST_LOG", "warn");
    procs.set(i, pb.start());
  }

  static List<Integer> freePorts(int n) throws IOException {
    List<ServerSocket> held = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        ServerSocket s = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
        held.add(s);
      }
      List<Integer> ports = new ArrayList<>();
      held.forEach(s -> ports.add(s.getLocalPort()));
      ports.sort(Integer::compare);
      return ports;
    } finally {
      for (ServerSocket s : held) {
        s.close();
      }
    }
  }

  static void waitPort(int port) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < deadline) {
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress("127.0.0.1", port), 200);
        return;
      } catch (IOException e) {
        Thread.sleep(20);
      }
    }
    throw new IllegalStateException("nothing listens on port " + port);
  }

  /** The index of the beacon that leads and can write, as a live beacon says. */
  int leader() throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (System.nanoTime() < deadline) {
      for (int i = 0; i < addrs.size(); i++) {
        Process p = procs.get(i);
        if (p == null || !p.isAlive()) {
          continue;
        }
        try (BeaconClient c =
            BeaconClient.builder(List.of(addrs.get(i))).timeout(java.time.Duration.ofSeconds(1)).retryFor(java.time.Duration.ofMillis(200)).build()) {
          Beacon.BeaconStatus s =
              c.call((ch, o) -> beacon.v1.ClusterGrpc.newFutureStub(ch).withDeadline(o.getDeadline())
                  .status(Beacon.BeaconStatusRequest.getDefaultInstance()));
          if (s.hasLeader() && !s.hasCannotWrite()) {
            int at = addrs.indexOf(s.getLeader());
            if (at >= 0) {
              return at;
            }
          }
        } catch (RuntimeException e) {
          // Not answering yet.
        }
      }
      Thread.sleep(50);
    }
    throw new IllegalStateException("no leader");
  }

  void kill(int i) throws InterruptedException {
    Process p = procs.get(i);
    if (p != null && p.isAlive()) {
      signal(p, "CONT");
      p.destroyForcibly().waitFor();
    }
  }

  void stop(int i) {
    signal(procs.get(i), "STOP");
  }

  void cont(int i) {
    signal(procs.get(i), "CONT");
  }

  private static void signal(Process p, String sig) {
    try {
      new ProcessBuilder("kill", "-" + sig, String.valueOf(p.pid())).start().waitFor();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  BeaconClient client(int first) {
    List<String> list = new ArrayList<>();
    list.add(addrs.get(first));
    for (String a : addrs) {
      if (!list.contains(a)) {
        list.add(a);
      }
    }
    return BeaconClient.builder(list).retryFor(java.time.Duration.ofSeconds(20)).build();
  }

  @Override
  public void close() throws InterruptedException {
    for (int i = 0; i < procs.size(); i++) {
      kill(i);
    }
  }
}
