package dev.beacon.client;

import beacon.v1.registry.RegistryGrpc;
import beacon.v1.registry.RegistryOuterClass.HealthStatus;
import beacon.v1.registry.RegistryOuterClass.NodeReport;
import beacon.v1.registry.RegistryOuterClass.NodeReportReply;
import beacon.v1.registry.RegistryOuterClass.RegisterReply;
import beacon.v1.registry.RegistryOuterClass.UnregisterRequest;
import io.grpc.Context;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A node ID held under a lease that a thread of its own keeps alive over the {@code
 * KeepAlive} stream, until {@link #close()}.
 *
 * <p>The lease is trusted only as far as a beacon confirmed it: each report's reply extends
 * it to one lease after the report was sent, so the service gives its ID up no later than
 * the leader does. A report unanswered for a quarter of the lease (half that after one went
 * unanswered) ends the stream there: the beacon is tried last for a while and the reports go
 * on through the next one. A beacon that answers {@code LEADER_CHANGED} (the leader it relayed
 * to leads no more) is asked again at once: it knows the next leader, or leads itself. The
 * lease is lost when the leader says the registration is gone,
 * or when no beacon confirmed it for a whole lease: {@link #lost()} completes, once.
 */
public final class Registration implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Registration.class);

  /** A registration's (term, index): later registrations of a node ID have larger ones. */
  public record FencingToken(long term, long index) implements Comparable<FencingToken> {
    @Override
    public int compareTo(FencingToken o) {
      int t = Long.compare(term, o.term);
      return t != 0 ? t : Long.compare(index, o.index);
    }
  }

  private final BeaconClient client;
  private final int nodeId;
  private final String nodeType;
  private final String addr;
  private final FencingToken token;
  private final Duration lease;
  private final long clockFloorMs;
  private final boolean snowflake;
  private final CompletableFuture<String> lost = new CompletableFuture<>();
  private final Object lock = new Object();
  private long confirmedUntilNanos;
  private long reservedMs;
  private NodeReport health;
  /** Wakes the keep-alive thread: a health change to report at once, or its stream ended. */
  private final java.util.concurrent.Semaphore wake = new java.util.concurrent.Semaphore(0);
  private volatile boolean kicked;
  private final Thread keeper;
  private final List<Checker> checkers = new ArrayList<>();
  private volatile boolean stopping;
  private volatile Context.CancellableContext stream;

  Registration(BeaconClient client, RegisterReply reply, boolean snowflake, Consumer<String> onLost) {
    this.client = client;
    this.nodeId = reply.getNode().getNodeId();
    this.nodeType = reply.getNode().getNodeType();
    this.addr = reply.getNode().getAddr();
    this.token = new FencingToken(reply.getNode().getTerm(), reply.getNode().getIndex());
    this.lease = Duration.ofMillis(Math.max(reply.getLeaseMs(), 1));
    this.clockFloorMs = reply.getClockFloorMs();
    this.snowflake = snowflake;
    this.confirmedUntilNanos = System.nanoTime() + lease.toNanos();
    if (onLost != null) {
      lost.thenAcceptAsync(onLost, client.executor());
    }
    this.keeper = new Thread(this::keepAlive, "beacon-keepalive-" + nodeId);
    keeper.setDaemon(true);
    keeper.start();
  }

  public int nodeId() {
    return nodeId;
  }

  public String nodeType() {
    return nodeType;
  }

  public String addr() {
    return addr;
  }

  public FencingToken fencingToken() {
    return token;
  }

  public Duration lease() {
    return lease;
  }

  /** Snowflake IDs on this node ID start after it (the previous holder's last clock). */
  public long clockFloorMs() {
    return clockFloorMs;
  }

  boolean reservesTime() {
    return snowflake;
  }

  /** Completes, with why, once the lease is lost. */
  public CompletableFuture<String> lost() {
    return lost;
  }

  /**
   * Whether the lease is known to hold now: check it before each use of the ID when it must
   * never be used past its lease.
   */
  public boolean holds() {
    synchronized (lock) {
      return !stopping && !lost.isDone() && System.nanoTime() < confirmedUntilNanos;
    }
  }

  long reservedMs() {
    synchronized (lock) {
      return reservedMs;
    }
  }

  /**
   * Sets the health every report carries from now on ({@code PASSING}, {@code WARNING},
   * {@code CRITICAL}), with why, and reports a change at once.
   */
  public void setHealth(Health status, String note) {
    byte[] bytes = note.getBytes(StandardCharsets.UTF_8);
    if (bytes.length > 256) {
      // What a beacon takes: a report refused for its note would not renew the lease.
      String cut = new String(bytes, 0, 256, StandardCharsets.UTF_8);
      while (cut.getBytes(StandardCharsets.UTF_8).length > 256 || cut.endsWith("\uFFFD")) {
        cut = cut.substring(0, cut.length() - 1);
      }
      note = cut;
    }
    NodeReport now = NodeReport.newBuilder().setHealth(status.wire()).setHealthNote(note).build();
    boolean changed;
    synchronized (lock) {
      changed = !now.equals(health);
      health = now;
    }
    if (changed) {
      // A change is reported at once, not at the next report: discovery hears of it sooner.
      kicked = true;
      wake.release();
    }
  }

  /** Runs {@code checks} beside the service (see {@link Checker}); stopped with the registration. */
  public Checker runChecks(List<Check> checks, Duration interval, int threshold) {
    Checker c = new Checker(checks, this::setHealth, interval, threshold);
    synchronized (lock) {
      checkers.add(c);
    }
    return c;
  }

  private NodeReport report() {
    NodeReport.Builder b =
        NodeReport.newBuilder().setNodeId(nodeId).setAddr(addr).setTerm(token.term()).setIndex(token.index());
    synchronized (lock) {
      if (health != null) {
        b.setHealth(health.getHealth()).setHealthNote(health.getHealthNote());
      }
    }
    if (snowflake) {
      // Two report intervals ahead: generation stops by itself within two missed reports.
      b.setClockMs(System.currentTimeMillis() + 2 * interval());
    }
    return b.build();
  }

  private long interval() {
    return Math.max(lease.toMillis() / 4, 10);
  }

  private void lose(String why) {
    if (lost.complete(why)) {
      log.warn("lease of node ID {} lost: {}", nodeId, why);
    }
  }

  private void keepAlive() {
    long patient = Math.max(interval(), 50);
    long attempt = patient;
    long pause = 10;
    // Whether the last stream ended on LEADER_CHANGED from its beacon, taken there again.
    boolean again = false;
    while (!stopping && !lost.isDone()) {
      String at = client.current();
      Outcome o = stream(at, attempt);
      if (stopping || lost.isDone()) {
        return;
      }
      if (o.leaseLost != null) {
        lose(o.leaseLost);
        return;
      }
      if (o.answered) {
        pause = 10;
        attempt = patient;
        again = false;
      }
      if (o.leaderChanged && !o.unanswered && !again) {
        // The beacon answered: the leader it carried the report to leads no more. It knows
        // the next one, or leads itself: the same beacon again, at once (once; a second
        // time, the next one).
        again = true;
        continue;
      }
      if (o.unanswered) {
        // The beacon (or the leader behind it) stopped answering: the next one at once, and
        // this one last for a while.
        attempt = Math.max(patient / 2, 50);
        client.suspect(at);
        client.next();
        continue;
      }
      client.next();
      BeaconClient.sleep(pause);
      pause = Math.min(pause * 2, interval());
    }
  }

  private static final class Outcome {
    boolean answered;
    boolean unanswered;
    /** The stream ended on LEADER_CHANGED from its beacon. */
    boolean leaderChanged;
    String leaseLost;
  }

  /** One KeepAlive stream at {@code at}, until a report goes unanswered for {@code attempt} ms. */
  private Outcome stream(String at, long attempt) {
    Outcome o = new Outcome();
    ArrayDeque<Long> sent = new ArrayDeque<>();
    CountDownLatch ended = new CountDownLatch(1);
    Context.CancellableContext ctx = Context.current().withCancellation();
    stream = ctx;
    ClientCallStreamObserver<NodeReport>[] requests = new ClientCallStreamObserver[1];
    ClientResponseObserver<NodeReport, NodeReportReply> replies =
        new ClientResponseObserver<>() {
          @Override
          public void beforeStart(ClientCallStreamObserver<NodeReport> r) {
            requests[0] = r;
          }

          @Override
          public void onNext(NodeReportReply reply) {
            long from;
            synchronized (sent) {
              o.answered = true;
              Long s = sent.poll();
              from = s == null ? System.nanoTime() : s;
            }
            synchronized (lock) {
              confirmedUntilNanos = Math.max(confirmedUntilNanos, from + lease.toNanos());
              reservedMs = Math.max(reservedMs, reply.getClockMs());
            }
          }

          @Override
          public void onError(Throwable t) {
            BeaconException e = BeaconException.of(t, at);
            if (e instanceof BeaconException.LeaseLost) {
              o.leaseLost = e.getMessage();
            } else if (e.silent()) {
              o.unanswered = true;
            } else if ("LEADER_CHANGED".equals(e.reason())) {
              o.leaderChanged = true;
            }
            ended.countDown();
            wake.release();
          }

          @Override
          public void onCompleted() {
            ended.countDown();
            wake.release();
          }
        };
    try {
      ctx.run(() -> RegistryGrpc.newStub(client.channel(at)).keepAlive(replies));
      boolean scheduled = false;
      while (!stopping && ended.getCount() > 0) {
        long now = System.nanoTime();
        long left;
        synchronized (lock) {
          left = confirmedUntilNanos - now;
          if (left <= 0) {
            o.leaseLost = "no beacon confirmed the lease for a whole lease (" + lease.toMillis() + " ms)";
            return o;
          }
        }
        synchronized (sent) {
          sent.add(now);
        }
        NodeReport report = report();
        // On schedule with over half the lease left, on a stream not cut short (a retry comes
        // a report later): the answer may wait for the leader's next heartbeat.
        boolean routine =
            scheduled && attempt >= interval() && report.getClockMs() == 0 && left > lease.toNanos() / 2;
        requests[0].onNext(routine ? report.toBuilder().setRoutine(true).build() : report);
        scheduled = true;
        long next = now + TimeUnit.MILLISECONDS.toNanos(interval());
        while (!stopping && ended.getCount() > 0 && System.nanoTime() < next) {
          synchronized (sent) {
            Long oldest = sent.peek();
            if (oldest != null && System.nanoTime() - oldest > TimeUnit.MILLISECONDS.toNanos(attempt)) {
              o.unanswered = true;
              return o;
            }
          }
          long untilLost;
          synchronized (lock) {
            untilLost = confirmedUntilNanos - System.nanoTime();
          }
          if (untilLost <= 0) {
            break;
          }
          wake.tryAcquire(Math.min(Math.max(attempt / 4, 5), TimeUnit.NANOSECONDS.toMillis(untilLost) + 1), TimeUnit.MILLISECONDS);
          if (kicked) {
            kicked = false;
            scheduled = false;
            break;
          }
        }
      }
      return o;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return o;
    } catch (RuntimeException e) {
      o.unanswered = BeaconException.of(e, at).silent();
      return o;
    } finally {
      ctx.cancel(null);
    }
  }

  /** Stops the keep-alive and the checks, and ends the registration: the ID is free at once. */
  @Override
  public void close() {
    close(true, 0);
  }

  /**
   * Stops the keep-alive and ends the registration; without {@code release} the ID is
   * quarantined as after a lapse, and {@code lastClockMs} becomes the next holder's clock
   * floor. A lease already lost is not an error.
   */
  public void close(boolean release, long lastClockMs) {
    if (stopping) {
      return;
    }
    stopping = true;
    List<Checker> cs;
    synchronized (lock) {
      cs = new ArrayList<>(checkers);
    }
    cs.forEach(Checker::close);
    Context.CancellableContext s = stream;
    if (s != null) {
      s.cancel(null);
    }
    try {
      keeper.join(lease.toMillis() + 1000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (lost.isDone()) {
      return;
    }
    UnregisterRequest req =
        UnregisterRequest.newBuilder()
            .setNodeId(nodeId)
            .setAddr(addr)
            .setTerm(token.term())
            .setIndex(token.index())
            .setRelease(release)
            .setClockMs(lastClockMs)
            .build();
    try {
      client.call(lease, (ch, opts) -> RegistryGrpc.newFutureStub(ch).withDeadline(opts.getDeadline()).unregister(req));
    } catch (BeaconException.LeaseLost e) {
      // Gone already: nothing to end.
    }
  }

  /** A service's health, as it says it. */
  public enum Health {
    PASSING(HealthStatus.HEALTH_PASSING),
    WARNING(HealthStatus.HEALTH_WARNING),
    CRITICAL(HealthStatus.HEALTH_CRITICAL);

    private final HealthStatus wire;

    Health(HealthStatus wire) {
      this.wire = wire;
    }

    HealthStatus wire() {
      return wire;
    }
  }
}
