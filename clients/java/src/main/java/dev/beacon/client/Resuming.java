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

  /**
   * How long a watch may hear nothing before it probes its beacon: an idle watch hears a
   * progress notice every few seconds (the beacons' {@code watch.progress_ms}, 5 s by
   * default), so a second more of silence is a beacon worth asking about. A stopped process
   * keeps its connection open and its HTTP/2 pings unanswered; grpc-java pings no oftener
   * than every 10 s, so the probe leaves it sooner.
   */
  static final Duration SILENT_FOR = Duration.ofSeconds(6);

  final BeaconClient client;
  private final LinkedBlockingQueue<Object> events = new LinkedBlockingQueue<>();
  private final CountDownLatch listed = new CountDownLatch(1);
  private final Thread thread;
  private final Thread silence;
  private final Object lock = new Object();
  private long index;
  private int resumes;
  private int resyncs;
  private boolean began;
  private boolean answered;
  private volatile BeaconException ended;
  private volatile boolean closing;
  private volatile Context.CancellableContext stream;
  /** The beacon of the stream under way, and when it last brought anything (nanoTime). */
  private volatile String streamAt;
  private volatile long heard;
  /** Set when the silence probe cut the stream under way. */
  private volatile boolean hung;

  Resuming(BeaconClient client, String name) {
    this.client = client;
    this.thread = new Thread(this::run, "beacon-" + name + "-watch");
    thread.setDaemon(true);
    this.silence = new Thread(this::watchSilence, "beacon-" + name + "-watch-silence");
    silence.setDaemon(true);
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
    silence.start();
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
    heard = System.nanoTime();
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

  /** Moves the watch's log position (a notice's index, a listing's): the stream is heard. */
  void at(long i) {
    heard = System.nanoTime();
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
        hung = false;
        heard = System.nanoTime();
        streamAt = at;
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
          stream = null;
          ctx.cancel(null);
        }
        if (closing) {
          return;
        }
        if (hung) {
          err =
              new BeaconException.DeadlineExceeded(
                  "beacon at " + at + " went silent on the watch for over " + SILENT_FOR.toMillis()
                      + " ms and did not answer a fresh connection",
                  io.grpc.Status.Code.DEADLINE_EXCEEDED, "", 0, "", Duration.ZERO, at, null);
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
   * Probes the beacon of the stream under way on a fresh connection once the stream has been
   * silent for {@link #SILENT_FOR}, and leaves one that does not answer (a stopped process):
   * the stream is cut and the watch resumes at the next beacon.
   */
  private void watchSilence() {
    try {
      while (!closing) {
        Thread.sleep(500);
        Context.CancellableContext s = stream;
        String at = streamAt;
        if (s == null || System.nanoTime() - heard < SILENT_FOR.toNanos()) {
          continue;
        }
        if (client.answers(at, Duration.ofMillis(500))) {
          heard = System.nanoTime();
          continue;
        }
        if (s != stream) {
          continue;
        }
        log.warn("watch leaves beacon at {}: silent for over {} ms", at, SILENT_FOR.toMillis());
        client.suspect(at);
        hung = true;
        s.cancel(null);
      }
    } catch (InterruptedException e) {
      // Closed.
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
    silence.interrupt();
    try {
      thread.join(5000);
      silence.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
