package dev.beacon.client;

import java.time.Duration;

/**
 * Time-ordered 64-bit IDs made locally on a registration's node ID, never repeated: it
 * generates only while the lease holds, never past the timestamp the leader committed for it
 * (the registration reserves time ahead), and never before the previous holder of the node ID
 * stopped. A clock that steps back by up to 5 ms is waited out. Layout: 41 bits of
 * milliseconds since 2024-01-01, 10 of worker (the node ID), 12 of sequence, as beacon's other
 * clients have it.
 */
public final class Snowflake {
  /** 2024-01-01T00:00:00Z. */
  public static final long EPOCH_MS = 1_704_067_200_000L;

  private static final int WORKER_BITS = 10;
  private static final int SEQ_BITS = 12;
  private static final long MAX_BACKWARD_MS = 5;

  private final Registration reg;
  private long lastMs;
  private long seq;

  /** A generator on {@code reg}, registered with snowflake on. */
  public Snowflake(Registration reg) {
    if (reg.nodeId() >= 1 << WORKER_BITS) {
      throw new IllegalArgumentException("node ID " + reg.nodeId() + " does not fit " + WORKER_BITS + " worker bits");
    }
    if (!reg.reservesTime()) {
      throw new IllegalArgumentException("register with snowflake on, so that reports reserve time");
    }
    this.reg = reg;
    this.lastMs = reg.clockFloorMs();
    // The first ID moves past the floor's millisecond.
    this.seq = (1 << SEQ_BITS) - 1;
  }

  /** The next ID, waiting at most {@code waitFor} for the keep-alive's next reservation. */
  public synchronized long next(Duration waitFor) {
    long deadline = System.nanoTime() + waitFor.toNanos();
    while (true) {
      if (!reg.holds()) {
        throw BeaconException.LeaseLost.because(
            "node ID " + reg.nodeId() + " is not held: " + reg.lost().getNow("the lease is unconfirmed"));
      }
      long now = System.currentTimeMillis();
      if (now < lastMs) {
        if (lastMs - now > MAX_BACKWARD_MS) {
          throw new BeaconException(
              "the clock stepped back " + (lastMs - now) + " ms: refusing rather than repeating IDs");
        }
        BeaconClient.sleep(lastMs - now);
        continue;
      }
      if (now == lastMs && seq >= (1 << SEQ_BITS) - 1) {
        BeaconClient.sleep(1);
        continue;
      }
      if (now > reg.reservedMs()) {
        if (System.nanoTime() > deadline) {
          throw new BeaconException(
              "no clock reservation confirmed by the leader: snowflake IDs wait for the keep-alive");
        }
        BeaconClient.sleep(5);
        continue;
      }
      seq = now == lastMs ? seq + 1 : 0;
      lastMs = now;
      return ((now - EPOCH_MS) << (WORKER_BITS + SEQ_BITS)) | ((long) reg.nodeId() << SEQ_BITS) | seq;
    }
  }

  /** The worker (node ID) an ID was made on. */
  public static int worker(long id) {
    return (int) ((id >>> SEQ_BITS) & ((1 << WORKER_BITS) - 1));
  }
}
