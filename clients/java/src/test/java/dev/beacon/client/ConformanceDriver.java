package dev.beacon.client;

import beacon.v1.registry.RegistryOuterClass.HealthFilter;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;

/**
 * Drives the Java client for beacon's client conformance suite (tests/conformance.rs):
 * commands in on stdin, answers and events out on stdout, one per line, the protocol every
 * client's driver speaks (docs/clients.md).
 */
public final class ConformanceDriver {
  private final PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
  private BeaconClient client;
  private final Map<Integer, Registration> regs = new HashMap<>();
  private final Map<String, Sequence> seqs = new HashMap<>();
  private final List<AutoCloseable> watches = new ArrayList<>();

  private synchronized void say(String line) {
    out.println(line);
  }

  private static String oneLine(String s) {
    return String.join(" ", String.valueOf(s).trim().split("\\s+"));
  }

  static String kind(Throwable e) {
    if (e instanceof BeaconException b && b.reason().equals("NOT_LEADER")) {
      return "NotLeader";
    }
    if (e instanceof BeaconException.TooLarge) return "TooLarge";
    if (e instanceof BeaconException.Busy) return "Busy";
    if (e instanceof BeaconException.Compacted) return "Compacted";
    if (e instanceof BeaconException.LeaseLost) return "LeaseLost";
    if (e instanceof BeaconException.NotFound) return "NotFound";
    if (e instanceof BeaconException.AlreadyExists) return "AlreadyExists";
    if (e instanceof BeaconException.FailedPrecondition) return "FailedPrecondition";
    if (e instanceof BeaconException.InvalidArgument) return "InvalidArgument";
    if (e instanceof BeaconException.ResourceExhausted) return "ResourceExhausted";
    if (e instanceof BeaconException.DeadlineExceeded) return "DeadlineExceeded";
    if (e instanceof BeaconException.Unavailable) return "Unavailable";
    return "Other";
  }

  /** Follows a watch on a thread of its own, each event a line. */
  private <E> void follow(Resuming<E> watch, java.util.function.Function<E, String> line) {
    Thread t =
        new Thread(
            () -> {
              try {
                while (true) {
                  E e = watch.next(Duration.ofSeconds(1));
                  if (e != null) {
                    say(line.apply(e));
                  }
                }
              } catch (RuntimeException ended) {
                // The watch ended: nothing more to tell.
              }
            });
    t.setDaemon(true);
    t.start();
    watches.add(watch);
  }

  private String run(String[] w) throws Exception {
    String cmd = w[0];
    java.util.function.IntFunction<String> arg = i -> i < w.length ? w[i] : "";
    if (!cmd.equals("connect") && client == null) {
      throw new IllegalStateException("connect first");
    }
    switch (cmd) {
      case "connect" -> {
        BeaconClient.Builder b = BeaconClient.builder(Arrays.asList(arg.apply(1).split(",")));
        if (!arg.apply(2).isEmpty()) {
          b.retryFor(Duration.ofMillis(Long.parseLong(arg.apply(2))));
        }
        client = b.build();
        return "";
      }
      case "register" -> {
        int[] id = new int[1];
        Registration reg =
            client.register(
                arg.apply(1),
                arg.apply(2),
                BeaconClient.RegisterOptions.defaults()
                    .withMetadata(arg.apply(3))
                    .onLost(why -> say("event lost " + id[0] + " " + oneLine(why))));
        id[0] = reg.nodeId();
        regs.put(reg.nodeId(), reg);
        return reg.nodeId() + " " + reg.fencingToken().term() + " " + reg.fencingToken().index() + " "
            + reg.lease().toMillis();
      }
      case "holds" -> {
        Registration reg = regs.get(Integer.parseInt(arg.apply(1)));
        if (reg == null) {
          throw new IllegalArgumentException("no registration " + arg.apply(1) + " here");
        }
        return String.valueOf(reg.holds());
      }
      case "unregister" -> {
        Registration reg = regs.remove(Integer.parseInt(arg.apply(1)));
        if (reg == null) {
          throw new IllegalArgumentException("no registration " + arg.apply(1) + " here");
        }
        reg.close();
        return "";
      }
      case "watch" -> {
        Watch watch = client.watch(List.of(arg.apply(2)), HealthFilter.FILTER_ANY);
        String id = arg.apply(1);
        follow(watch, e -> "event node " + id + " " + e.kind() + " " + e.node().getNodeId());
        return "";
      }
      case "numbers" -> {
        Sequence seq = seqs.get(arg.apply(1));
        if (seq == null) {
          try {
            long step = arg.apply(3).isEmpty() ? 0 : Long.parseLong(arg.apply(3));
            client.createSequence(arg.apply(1), 0, step);
          } catch (BeaconException.AlreadyExists e) {
            // Made before.
          }
          seq = client.sequence(arg.apply(1));
          seqs.put(arg.apply(1), seq);
        }
        StringJoiner got = new StringJoiner(" ");
        for (int i = 0; i < Integer.parseInt(arg.apply(2)); i++) {
          got.add(String.valueOf(seq.next()));
        }
        return got.toString();
      }
      case "config_watch" -> {
        ConfigWatch watch = client.configWatch(List.of(arg.apply(2)));
        String id = arg.apply(1);
        follow(
            watch,
            e ->
                e.document() == null
                    ? "event config " + id + " deleted " + e.deleted()
                    : "event config " + id + " put " + e.document().getKey() + " " + e.document().getRevision()
                        + " " + e.document().getValue().toStringUtf8());
        return "";
      }
      case "config_put" -> {
        return String.valueOf(client.configPut(arg.apply(1), arg.apply(2).getBytes(StandardCharsets.UTF_8), null));
      }
      case "put_large" -> {
        client.configPut(arg.apply(1), new byte[Integer.parseInt(arg.apply(2))], null);
        return "";
      }
      case "bench" -> {
        if (!arg.apply(1).equals("alloc") && !arg.apply(1).equals("renew")) {
          throw new IllegalArgumentException("bench alloc|renew, not `" + arg.apply(1) + "`");
        }
        return bench(
            arg.apply(1), Duration.ofSeconds(Long.parseLong(arg.apply(2))), Integer.parseInt(arg.apply(3)));
      }
      default -> throw new IllegalArgumentException("unknown command `" + cmd + "`");
    }
  }

  /** The address of a bench command's registration {@code n} of {@code caller}: distinct for each pair. */
  private static String benchAddr(int caller, long n) {
    long hi = n / 60_000;
    return "10." + (100 + caller % 150) + "." + (hi / 256 % 256) + "." + (hi % 256) + ":" + (1024 + n % 60_000);
  }

  private beacon.v1.registry.RegistryOuterClass.NodeInfo benchRegister(int caller, long n) {
    var req =
        beacon.v1.registry.RegistryOuterClass.RegisterRequest.newBuilder()
            .setNodeType("BENCH")
            .setAddr(benchAddr(caller, n))
            .build();
    return client
        .call((ch, o) -> beacon.v1.registry.RegistryGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).register(req))
        .getNode();
  }

  /**
   * {@code callers} threads sharing the client for {@code d}: {@code alloc} allocates node IDs
   * ({@code Register} through the client's failover and back-off), {@code renew} renews one
   * registration each with reports back to back on a {@code KeepAlive} stream of its own.
   * Answers {@code DONE ERRORS P50_US P99_US}.
   */
  private String bench(String what, Duration d, int callers) throws InterruptedException {
    long deadline = System.nanoTime() + d.toNanos();
    List<Long> took = java.util.Collections.synchronizedList(new ArrayList<>());
    java.util.concurrent.atomic.AtomicInteger errors = new java.util.concurrent.atomic.AtomicInteger();
    List<Thread> threads = new ArrayList<>();
    for (int c = 0; c < callers; c++) {
      int caller = c;
      Runnable alloc =
          () -> {
            List<Long> mine = new ArrayList<>();
            for (long n = 0; System.nanoTime() < deadline; n++) {
              long started = System.nanoTime();
              try {
                benchRegister(caller, n);
                mine.add((System.nanoTime() - started) / 1000);
              } catch (BeaconException e) {
                errors.incrementAndGet();
              }
            }
            took.addAll(mine);
          };
      Runnable renew =
          () -> {
            List<Long> mine = new ArrayList<>();
            try {
              var node = benchRegister(caller, 1L << 24);
              var report =
                  beacon.v1.registry.RegistryOuterClass.NodeReport.newBuilder()
                      .setNodeId(node.getNodeId())
                      .setAddr(node.getAddr())
                      .setTerm(node.getTerm())
                      .setIndex(node.getIndex())
                      .build();
              java.util.concurrent.LinkedBlockingQueue<Object> replies = new java.util.concurrent.LinkedBlockingQueue<>();
              var stream =
                  beacon.v1.registry.RegistryGrpc.newStub(client.channel(client.current()))
                      .keepAlive(
                          new io.grpc.stub.StreamObserver<>() {
                            @Override
                            public void onNext(beacon.v1.registry.RegistryOuterClass.NodeReportReply r) {
                              replies.add(r);
                            }

                            @Override
                            public void onError(Throwable t) {
                              replies.add(t);
                            }

                            @Override
                            public void onCompleted() {
                              replies.add(new IllegalStateException("the stream ended"));
                            }
                          });
              while (System.nanoTime() < deadline) {
                long started = System.nanoTime();
                stream.onNext(report);
                Object r = replies.poll(10, java.util.concurrent.TimeUnit.SECONDS);
                if (!(r instanceof beacon.v1.registry.RegistryOuterClass.NodeReportReply)) {
                  errors.incrementAndGet();
                  break;
                }
                mine.add((System.nanoTime() - started) / 1000);
              }
              stream.onCompleted();
            } catch (RuntimeException | InterruptedException e) {
              errors.incrementAndGet();
            }
            took.addAll(mine);
          };
      Thread t = new Thread(what.equals("alloc") ? alloc : renew, "bench-" + c);
      threads.add(t);
      t.start();
    }
    for (Thread t : threads) {
      t.join();
    }
    List<Long> sorted = new ArrayList<>(took);
    java.util.Collections.sort(sorted);
    java.util.function.DoubleFunction<Long> at =
        q -> sorted.isEmpty() ? 0L : sorted.get(Math.min((int) (sorted.size() * q), sorted.size() - 1));
    return sorted.size() + " " + errors.get() + " " + at.apply(0.5) + " " + at.apply(0.99);
  }

  private void quit() {
    for (AutoCloseable w : watches) {
      try {
        w.close();
      } catch (Exception e) {
        // Ending anyway.
      }
    }
    regs.values().forEach(Registration::close);
    seqs.values().forEach(Sequence::close);
    if (client != null) {
      client.close();
    }
  }

  /**
   * A service's JVM has gRPC loaded long before it makes a client; this one loads it before
   * the first command (a connection to a closed port), so that what the suite times is the
   * client, not the JVM's first use of Netty.
   */
  /**
   * Loads what a first call loads (Netty's HTTP/2, the stubs, protobuf, the client's own
   * classes) by calling a gRPC server in this JVM once through the library, so that the cases
   * time the client and not the JVM loading its classes: a service's JVM has done this long
   * before its client meets a hung beacon. On a loaded two-core host the first call of a cold
   * JVM took 0.8-2.9 s, all of it class loading and the JIT's first passes.
   */
  private static void warmUp() throws Exception {
    io.grpc.protobuf.services.HealthStatusManager health = new io.grpc.protobuf.services.HealthStatusManager();
    io.grpc.Server server =
        io.grpc.Grpc.newServerBuilderForPort(0, io.grpc.InsecureServerCredentials.create())
            .addService(health.getHealthService())
            .build()
            .start();
    try (BeaconClient warm =
        BeaconClient.builder(List.of("127.0.0.1:" + server.getPort())).retryFor(Duration.ofSeconds(2)).build()) {
      warm.answers("127.0.0.1:" + server.getPort(), Duration.ofSeconds(5));
      try {
        warm.register("WARM", "127.0.0.1:1", BeaconClient.RegisterOptions.defaults());
      } catch (BeaconException expected) {
        // The warm-up server serves health alone: this call is refused, as it should be.
      }
    } finally {
      server.shutdownNow();
    }
  }

  public static void main(String[] args) throws Exception {
    warmUp();
    ConformanceDriver d = new ConformanceDriver();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] words = line.trim().split("\\s+");
      if (words.length == 0 || words[0].isEmpty()) {
        continue;
      }
      if (words[0].equals("quit")) {
        d.quit();
        d.say("ok");
        System.exit(0);
      }
      try {
        String answer = d.run(words);
        d.say(answer.isEmpty() ? "ok" : "ok " + answer);
      } catch (Exception e) {
        d.say("err " + kind(e) + " " + oneLine(e.getMessage()));
      }
    }
    d.quit();
    System.exit(0);
  }
}
