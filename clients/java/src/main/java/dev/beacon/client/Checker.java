package dev.beacon.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiConsumer;

/**
 * Runs a registration's checks every interval on a thread of its own; each round's status is
 * the worst of theirs, and a status is reported once it has held for {@code threshold}
 * rounds in a row, so one slow answer does not take the service out of discovery.
 */
public final class Checker implements AutoCloseable {
  private final Thread thread;
  private volatile boolean stopped;

  Checker(List<Check> checks, BiConsumer<Registration.Health, String> report, Duration interval, int threshold) {
    if (checks.isEmpty()) {
      throw new IllegalArgumentException("no checks to run");
    }
    Hysteresis h = new Hysteresis(Math.max(threshold, 1));
    long every = Math.max(interval.toMillis(), 1);
    thread =
        new Thread(
            () -> {
              while (!stopped) {
                List<Check.Finding> found = new ArrayList<>();
                for (Check c : checks) {
                  found.add(c.run());
                }
                Check.Finding w = worst(found);
                if (!stopped && h.observe(w.status())) {
                  report.accept(w.status(), w.note());
                }
                try {
                  Thread.sleep(every);
                } catch (InterruptedException e) {
                  return;
                }
              }
            },
            "beacon-checks");
    thread.setDaemon(true);
    thread.start();
  }

  static Check.Finding worst(List<Check.Finding> found) {
    Registration.Health status = Registration.Health.PASSING;
    for (Check.Finding f : found) {
      if (f.status().ordinal() > status.ordinal()) {
        status = f.status();
      }
    }
    List<String> notes = new ArrayList<>();
    for (Check.Finding f : found) {
      if (f.status() == status && !f.note().isEmpty()) {
        notes.add(f.note());
      }
    }
    return new Check.Finding(status, String.join("; ", notes));
  }

  /** Reports a status only once it has held for {@code threshold} rounds in a row. */
  static final class Hysteresis {
    private final int threshold;
    private Registration.Health published = Registration.Health.PASSING;
    private Registration.Health candidate = Registration.Health.PASSING;
    private int held;

    Hysteresis(int threshold) {
      this.threshold = threshold;
    }

    boolean observe(Registration.Health s) {
      if (s == published) {
        candidate = s;
        held = 0;
        return false;
      }
      if (s != candidate) {
        candidate = s;
        held = 0;
      }
      held++;
      if (held >= threshold) {
        published = s;
        held = 0;
        return true;
      }
      return false;
    }
  }

  /** Stops the checks. */
  @Override
  public void close() {
    stopped = true;
    thread.interrupt();
    try {
      thread.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
