package dev.beacon.client;

import beacon.v1.sequence.SequencesGrpc;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The numbers of a named sequence, never handed out twice across the cluster, from a double
 * buffer of segments: each segment comes from the leader, committed before it is answered,
 * and the next is fetched on a thread of its own once a share of the current one is used, so
 * {@link #next()} is a local increment almost always. If no beacon answers it serves what it
 * holds; only when both segments are used up does it wait, at most {@code waitFor}. Safe for
 * many threads; {@link #close()} hands the unused tail back.
 */
public final class Sequence implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Sequence.class);

  private final BeaconClient client;
  private final String name;
  private final long count;
  private final double prefetchAt;
  private final Duration waitFor;
  private long[] current; // next, end, index, first
  private long[] spare;
  private boolean fetching;
  private boolean closed;
  private RuntimeException lastError;
  private int fetches;
  private int failures;

  Sequence(BeaconClient client, String name, long count, double prefetchAt, Duration waitFor) {
    this.client = client;
    this.name = name;
    this.count = count;
    this.prefetchAt = prefetchAt > 0 && prefetchAt <= 1 ? prefetchAt : 0.2;
    this.waitFor = waitFor;
    this.current = fetch();
    this.fetches = 1;
  }

  private long[] fetch() {
    beacon.v1.sequence.Sequence.NextSegment req =
        beacon.v1.sequence.Sequence.NextSegment.newBuilder().setName(name).setCount(count).build();
    beacon.v1.sequence.Sequence.Segment s =
        client.call((ch, o) -> SequencesGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).next(req)).getSegment();
    return new long[] {s.getStart(), s.getEnd(), s.getIndex(), s.getStart()};
  }

  private void prefetch() {
    fetching = true;
    Thread t =
        new Thread(
            () -> {
              long[] got = null;
              RuntimeException err = null;
              try {
                got = fetch();
              } catch (RuntimeException e) {
                err = e;
              }
              synchronized (this) {
                fetching = false;
                if (err != null) {
                  failures++;
                  lastError = err;
                } else if (closed) {
                  giveBack(got);
                } else {
                  fetches++;
                  lastError = null;
                  spare = got;
                }
                notifyAll();
              }
            },
            "beacon-sequence");
    t.setDaemon(true);
    t.start();
  }

  /** The next number. */
  public synchronized long next() {
    long deadline = 0;
    while (true) {
      if (closed) {
        throw new IllegalStateException("sequence `" + name + "` is closed");
      }
      long[] cur = current;
      if (cur != null && cur[0] <= cur[1]) {
        long n = cur[0]++;
        double used = cur[0] - cur[3];
        double size = cur[1] - cur[3] + 1;
        if (spare == null && !fetching && used >= prefetchAt * size) {
          prefetch();
        }
        return n;
      }
      if (spare != null) {
        current = spare;
        spare = null;
        continue;
      }
      if (!fetching) {
        prefetch();
      }
      long now = System.nanoTime();
      if (deadline == 0) {
        deadline = now + waitFor.toNanos();
      }
      if (now >= deadline) {
        throw new BeaconException.Unavailable(
            "both segments of sequence `" + name + "` are used up and no new one came within "
                + waitFor.toMillis() + " ms: " + lastError,
            io.grpc.Status.Code.UNAVAILABLE, "", 0, "", Duration.ZERO, "", lastError);
      }
      try {
        wait(Math.max((deadline - now) / 1_000_000, 1));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new BeaconException("interrupted");
      }
    }
  }

  /** Segments fetched, and fetches that failed. */
  public synchronized int[] stats() {
    return new int[] {fetches, failures};
  }

  private void giveBack(long[] s) {
    if (s == null || s[0] > s[1]) {
      return;
    }
    beacon.v1.sequence.Sequence.GiveBack req =
        beacon.v1.sequence.Sequence.GiveBack.newBuilder().setName(name).setStart(s[0]).setEnd(s[1]).setIndex(s[2]).build();
    try {
      client.call(Duration.ofSeconds(1), (ch, o) -> SequencesGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).giveBack(req));
    } catch (BeaconException e) {
      // Not the last segment any more, or nobody answers: the tail is burnt.
      log.debug("the tail of sequence `{}` is not given back: {}", name, e.getMessage());
    }
  }

  /** Hands back the unused tail of the last segment, so a restart burns no numbers. */
  @Override
  public void close() {
    long[] tail;
    synchronized (this) {
      tail = spare != null ? spare : current;
      current = null;
      spare = null;
      closed = true;
    }
    giveBack(tail);
  }
}
