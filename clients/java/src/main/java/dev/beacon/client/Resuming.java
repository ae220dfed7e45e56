package dev.beacon.client;

import io.grpc.Channel;
import io.grpc.Context;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A watch's server stream (a listing, then notices) run on a thread of its own and resumed
 * across leader changes from the log index after the last one heard: every change is told
 * once, in order; only when the beacon no longer keeps changes that old (COMPACTED) does it
 * list again. Its events are read with {@link #next(Duration)}, a blocking iterator.
 */
public abstract class Resuming<E> implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Resuming.class);
  private static final Object END = new Object();

  final BeaconClient client;
  private final LinkedBlockingQueue<Object> events = new LinkedBlockingQueue<>();
  private final CountDownLatch listed = new CountDownLatch(1);
  private final Thread thread;
  private final Object lock = new Object();
  private long index;
  private int resumes;
  private int resyncs;
  private boolean began;
  private boolean answered;
  private volatile BeaconException ended;
  private volatile boolean closing;
  private volatile Context.CancellableContext stream;

  Resuming(BeaconClient client, String name) {
    this.client = client;
    this.thread = new Thread(this::run, "beacon-" + name + "-watch");
    thread.setDaemon(true);
  }

  /**
   * Opens the stream on {@code channel} from log index {@code start} (0: with a listing;
   * {@code relist}: again after COMPACTED) and takes what comes until it breaks.
   */
  abstract void follow(Channel channel, long start, boolean relist);

  /** Whether {@code e} ends the watch (by default: what is not worth retrying). */
  boolean ends(BeaconException e) {
    return !e.retryable() && !e.silent();
  }

  /** Starts the watch and waits for its first listing; the error that refused it. */
  void begin(Duration limit) {
    thread.start();
    try {
      if (!listed.await(limit.toMillis(), TimeUnit.MILLISECONDS)) {
        close();
        throw new BeaconException.Unavailable(
            "no beacon answered the watch within " + limit.toMillis() + " ms",
            io.grpc.Status.Code.UNAVAILABLE, "", 0, "", Duration.ZERO, "", null);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      close();
      throw new BeaconException("interrupted");
    }
    if (ended != null) {
      close();
      throw ended;
    }
  }

  /** A stream's first answer: a resume from {@code start} (over 0), or a listing. */
  void first(long start, boolean relist) {
    synchronized (lock) {
      if (start > 0) {
        resumes++;
      } else if (relist) {
        resyncs++;
      }
      began = true;
      answered = true;
    }
  }

  /** Ends the stream under way (the watch goes on, or ends, as its error says). */
  void cancelStream() {
    Context.CancellableContext s = stream;
    if (s != null) {
      s.cancel(null);
    }
  }

  void isListed() {
    listed.countDown();
  }

  void at(long i) {
    synchronized (lock) {
      index = Math.max(index, i);
    }
  }

  void tell(E event) {
    events.add(event);
  }

  void tellAll(List<E> all) {
    events.addAll(all);
  }

  private void run() {
    long pause = 10;
    boolean relist = false;
    try {
      while (!closing) {
        client.connect(client.timeout);
        String at = client.current();
        long start;
        synchronized (lock) {
          start = began && !relist ? index + 1 : 0;
        }
        Context.CancellableContext ctx = Context.current().withCancellation();
        stream = ctx;
        BeaconException err;
        try {
          long from = start;
          boolean again = relist;
          ctx.run(() -> follow(client.channel(at), from, again));
          err = null;
        } catch (RuntimeException e) {
          err = BeaconException.of(e, at);
        } finally {
          ctx.cancel(null);
        }
        if (closing) {
          return;
        }
        synchronized (lock) {
          if (answered) {
            answered = false;
            relist = false;
            pause = 10;
          }
        }
        if (err instanceof BeaconException.Compacted) {
          relist = true;
          continue;
        }
        if (err != null && err.silent()) {
          client.suspect(at);
        }
        if (err != null && ends(err)) {
          ended = err;
          log.warn("watch ended: {}", err.getMessage());
          return;
        }
        client.next();
        Thread.sleep(pause);
        pause = Math.min(pause * 2, 500);
      }
    } catch (InterruptedException e) {
      // Closed.
    } finally {
      listed.countDown();
      events.add(END);
    }
  }

  /**
   * The next event, waiting at most {@code timeout}; {@code null} when none came. Throws the
   * error that ended the watch, or {@link IllegalStateException} once it is closed.
   */
  @SuppressWarnings("unchecked")
  public E next(Duration timeout) {
    Object o;
    try {
      o = events.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
    if (o == END) {
      events.add(END);
      if (ended != null) {
        throw ended;
      }
      throw new IllegalStateException("the watch is closed");
    }
    return (E) o;
  }

  /** The log position the watch is as of. */
  public long index() {
    synchronized (lock) {
      return index;
    }
  }

  /** How many times it resumed from an index. */
  public int resumes() {
    synchronized (lock) {
      return resumes;
    }
  }

  /** How many times it listed again after COMPACTED. */
  public int resyncs() {
    synchronized (lock) {
      return resyncs;
    }
  }

  @Override
  public void close() {
    closing = true;
    Context.CancellableContext s = stream;
    if (s != null) {
      s.cancel(null);
    }
    thread.interrupt();
    try {
      thread.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
