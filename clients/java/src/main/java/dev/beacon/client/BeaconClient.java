package dev.beacon.client;

import beacon.v1.configs.ConfigsGrpc;
import beacon.v1.configs.ConfigsOuterClass.Document;
import beacon.v1.configs.ConfigsOuterClass.GetRequest;
import beacon.v1.configs.ConfigsOuterClass.Op;
import beacon.v1.configs.ConfigsOuterClass.WriteRequest;
import beacon.v1.registry.RegistryGrpc;
import beacon.v1.registry.RegistryOuterClass.HealthFilter;
import beacon.v1.registry.RegistryOuterClass.NodeInfo;
import beacon.v1.registry.RegistryOuterClass.NodesReply;
import beacon.v1.registry.RegistryOuterClass.NodesRequest;
import beacon.v1.registry.RegistryOuterClass.RegisterReply;
import beacon.v1.registry.RegistryOuterClass.RegisterRequest;
import beacon.v1.sequence.SequencesGrpc;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ConnectivityState;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A cluster of beacons: any of them takes any call (a follower relays what only the leader
 * can answer), and the client moves past one that is down, refuses connections, or hangs. A
 * fresh connection dials the next beacon when the one before has not answered within the
 * attempt delay (100 ms) and takes the first to answer; a call waiting on a silent beacon
 * probes it over a fresh connection every half ping interval and leaves a beacon that does
 * not answer. A leader change and {@code BUSY} (after its retry-after, with jitter) are
 * retried within {@code retryFor}. Safe for many threads; close it when done.
 */
public final class BeaconClient implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(BeaconClient.class);

  /** A call attempt against one beacon: the channel, and the deadline it must keep. */
  @FunctionalInterface
  public interface Attempt<T> {
    ListenableFuture<T> start(Channel channel, CallOptions deadline);
  }

  private final List<String> endpoints;
  final Duration timeout;
  final Duration retryFor;
  private final Duration pingInterval;
  private final Duration attemptDelay;
  private final Duration suspectFor;
  private final Metadata headers;
  private final ChannelCredentials credentials;

  private final Object lock = new Object();
  private final Map<String, ManagedChannel> channels = new HashMap<>();
  private final Map<String, Instant> suspects = new HashMap<>();
  private int current;
  private boolean closed;
  /** What the async calls and the lease callbacks run on; shut down with the client. */
  private final ExecutorService executor =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "beacon-client");
            t.setDaemon(true);
            return t;
          });

  private BeaconClient(Builder b) {
    this.endpoints = List.copyOf(b.endpoints);
    this.timeout = b.timeout;
    this.retryFor = b.retryFor;
    this.pingInterval = b.pingInterval;
    this.attemptDelay = b.attemptDelay;
    this.suspectFor = b.suspectFor;
    this.credentials = b.credentials;
    this.headers = new Metadata();
    if (b.token != null && !b.token.isEmpty()) {
      headers.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + b.token);
    }
    if (b.serializable) {
      headers.put(Metadata.Key.of("beacon-consistency", Metadata.ASCII_STRING_MARSHALLER), "serializable");
    }
  }

  /** A builder of a client of the beacons at {@code endpoints} ({@code host:port}). */
  public static Builder builder(List<String> endpoints) {
    return new Builder(endpoints);
  }

  /** How a client reaches its cluster. */
  public static final class Builder {
    private final List<String> endpoints;
    private String token;
    private ChannelCredentials credentials = InsecureChannelCredentials.create();
    private Duration timeout = Duration.ofSeconds(5);
    private Duration retryFor = Duration.ofSeconds(10);
    private Duration pingInterval = Duration.ofSeconds(1);
    private Duration attemptDelay = Duration.ofMillis(100);
    private Duration suspectFor = Duration.ofSeconds(5);
    private boolean serializable;

    private Builder(List<String> endpoints) {
      if (endpoints == null || endpoints.isEmpty()) {
        throw new IllegalArgumentException("give at least one beacon address (host:port)");
      }
      for (String e : endpoints) {
        if (!e.contains(":")) {
          throw new IllegalArgumentException("endpoint `" + e + "` is not host:port");
        }
      }
      this.endpoints = endpoints;
    }

    /** A token of the cluster's {@code auth.tokens} (sent as {@code authorization: Bearer}). */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    /** TLS, or other credentials (plaintext by default). */
    public Builder credentials(ChannelCredentials credentials) {
      this.credentials = credentials;
      return this;
    }

    /** Bounds each attempt at one beacon (5 s). */
    public Builder timeout(Duration timeout) {
      this.timeout = timeout;
      return this;
    }

    /** How long a call keeps trying other beacons while the cluster cannot answer (10 s). */
    public Builder retryFor(Duration retryFor) {
      this.retryFor = retryFor;
      return this;
    }

    /** A call silent for half of it probes its beacon (1 s). */
    public Builder pingInterval(Duration pingInterval) {
      this.pingInterval = pingInterval;
      return this;
    }

    /** A fresh connection dials the next beacon after it (100 ms). */
    public Builder attemptDelay(Duration attemptDelay) {
      this.attemptDelay = attemptDelay;
      return this;
    }

    /** Reads from the called beacon's replica at once, not linearizably. */
    public Builder serializable() {
      this.serializable = true;
      return this;
    }

    public BeaconClient build() {
      return new BeaconClient(this);
    }
  }

  // -- connections ------------------------------------------------------------------------

  ManagedChannel managed(String at) {
    synchronized (lock) {
      if (closed) {
        throw new BeaconException.Unavailable(
            "the client is closed", Status.Code.CANCELLED, "", 0, "", Duration.ZERO, at, null);
      }
      // HTTP/2 pings on every connection, with or without calls: a stopped beacon under a
      // watch or a keep-alive stream is noticed within about 10 s and the stream goes on
      // elsewhere; calls are watched more closely (see watched).
      return channels.computeIfAbsent(
          at,
          a ->
              Grpc.newChannelBuilder(a, credentials)
                  .keepAliveTime(10, TimeUnit.SECONDS)
                  .keepAliveTimeout(2 * pingInterval.toMillis(), TimeUnit.MILLISECONDS)
                  .keepAliveWithoutCalls(true)
                  .build());
    }
  }

  /** The channel to beacon {@code at}, carrying the client's headers. */
  Channel channel(String at) {
    return ClientInterceptors.intercept(managed(at), MetadataUtils.newAttachHeadersInterceptor(headers));
  }

  /**
   * Runs a call's callbacks on the transport's thread. A unary call's callback only completes
   * its future, which the calling thread waits on: without this, each answer went through
   * the channel's executor, one more thread handoff per call.
   */
  private static final ClientInterceptor DIRECT =
      new ClientInterceptor() {
        @Override
        public <Q, R> ClientCall<Q, R> interceptCall(
            MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
          return next.newCall(method, options.withExecutor(MoreExecutors.directExecutor()));
        }
      };

  /** {@link #channel} for unary calls, whose callbacks only complete a future. */
  private Channel unaryChannel(String at) {
    return ClientInterceptors.intercept(channel(at), DIRECT);
  }

  ExecutorService executor() {
    return executor;
  }

  /** The beacon calls go to now. */
  public String current() {
    synchronized (lock) {
      return endpoints.get(current);
    }
  }

  /** Notes that {@code at} did not answer in time: tried last for a while. */
  void suspect(String at) {
    synchronized (lock) {
      Instant now = Instant.now();
      suspects.values().removeIf(until -> !until.isAfter(now));
      suspects.put(at, now.plus(suspectFor));
    }
    log.debug("beacon at {} did not answer in time: tried last for a while", at);
  }

  /** Moves on to the next beacon, passing over suspected ones unless every one is. */
  String next() {
    synchronized (lock) {
      int n = endpoints.size();
      Instant now = Instant.now();
      for (int step = 1; step <= n; step++) {
        int i = (current + step) % n;
        Instant until = suspects.get(endpoints.get(i));
        if (until == null || !until.isAfter(now)) {
          current = i;
          return endpoints.get(i);
        }
      }
      current = (current + 1) % n;
      return endpoints.get(current);
    }
  }

  private List<String> dialOrder() {
    synchronized (lock) {
      int n = endpoints.size();
      Instant now = Instant.now();
      List<String> good = new ArrayList<>();
      List<String> bad = new ArrayList<>();
      for (int k = 0; k < n; k++) {
        String b = endpoints.get((current + k) % n);
        Instant until = suspects.get(b);
        (until != null && until.isAfter(now) ? bad : good).add(b);
      }
      good.addAll(bad);
      return good;
    }
  }

  private void use(String at) {
    synchronized (lock) {
      int i = endpoints.indexOf(at);
      if (i >= 0) {
        current = i;
      }
    }
  }

  /**
   * Makes the beacon in use one whose connection is up: the current one if it is, else the
   * first to connect of it and the next ones, each dialled the attempt delay after the one
   * before, or at once after one fails. Waits {@code limit} at most.
   */
  void connect(Duration limit) {
    List<String> order = dialOrder();
    if (managed(order.get(0)).getState(false) == ConnectivityState.READY) {
      use(order.get(0));
      return;
    }
    long deadline = System.nanoTime() + limit.toNanos();
    LinkedBlockingQueue<Object[]> settled = new LinkedBlockingQueue<>();
    int started = 0;
    int failed = 0;
    try {
      while (true) {
        if (started < order.size()) {
          watch(order.get(started), settled);
          started++;
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return;
        }
        long wait = started < order.size() ? Math.min(left, attemptDelay.toNanos()) : left;
        Object[] o = settled.poll(wait, TimeUnit.NANOSECONDS);
        while (o != null) {
          if ((Boolean) o[1]) {
            use((String) o[0]);
            return;
          }
          failed++;
          if (failed >= order.size()) {
            return;
          }
          o = failed < started ? settled.poll() : null;
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void watch(String at, LinkedBlockingQueue<Object[]> settled) {
    ManagedChannel ch = managed(at);
    Runnable[] check = new Runnable[1];
    check[0] =
        () -> {
          ConnectivityState s = ch.getState(true);
          switch (s) {
            case READY -> settled.add(new Object[] {at, true});
            case TRANSIENT_FAILURE, SHUTDOWN -> settled.add(new Object[] {at, false});
            default -> ch.notifyWhenStateChanged(s, check[0]);
          }
        };
    check[0].run();
  }

  /**
   * Whether {@code at} answers a health check on a fresh connection of its own within {@code
   * limit}: any answer counts, a refusal too; only silence does not.
   */
  boolean answers(String at, Duration limit) {
    ManagedChannel ch = Grpc.newChannelBuilder(at, credentials).build();
    try {
      HealthGrpc.newBlockingStub(ClientInterceptors.intercept(ch, MetadataUtils.newAttachHeadersInterceptor(headers)))
          .withWaitForReady()
          .withDeadlineAfter(limit.toMillis(), TimeUnit.MILLISECONDS)
          .check(HealthCheckRequest.getDefaultInstance());
      return true;
    } catch (StatusRuntimeException e) {
      Status.Code c = e.getStatus().getCode();
      return c != Status.Code.DEADLINE_EXCEEDED && c != Status.Code.UNAVAILABLE;
    } finally {
      ch.shutdownNow();
    }
  }

  /**
   * Runs {@code attempt} with failover: on the next beacon whenever one cannot answer now,
   * after {@code BUSY}'s retry-after (with jitter) on the same one, until {@code retryFor}
   * has passed. Each attempt is bounded by the timeout and what is left, and leaves a hung
   * beacon within about one ping interval.
   */
  public <T> T call(Attempt<T> attempt) {
    return call(retryFor, attempt);
  }

  <T> T call(Duration retryFor, Attempt<T> attempt) {
    long deadline = System.nanoTime() + retryFor.toNanos();
    long pause = 10;
    Set<String> refused = new HashSet<>();
    while (true) {
      long left = Math.max((deadline - System.nanoTime()) / 1_000_000, 50);
      connect(Duration.ofMillis(Math.min(timeout.toMillis(), left)));
      String at = current();
      long bound = Math.max(Math.min(timeout.toMillis(), left), 50);
      CallOptions options = CallOptions.DEFAULT.withDeadlineAfter(bound, TimeUnit.MILLISECONDS);
      BeaconException err;
      try {
        return watched(at, attempt.start(unaryChannel(at), options));
      } catch (Hung hung) {
        suspect(at);
        if (System.nanoTime() + pause * 1_000_000 > deadline) {
          throw new BeaconException.DeadlineExceeded(
              hung.getMessage(), Status.Code.DEADLINE_EXCEEDED, "", 0, "", Duration.ZERO, at, null);
        }
        next();
        continue;
      } catch (BeaconException e) {
        err = e;
      }
      if (err.silent()) {
        suspect(at);
        if (System.nanoTime() + pause * 1_000_000 > deadline) {
          throw err;
        }
        next();
        continue;
      }
      if (err instanceof BeaconException.Busy) {
        long wait = (long) (Math.max(err.retryAfter().toMillis(), 5) * (0.5 + ThreadLocalRandom.current().nextDouble()));
        if (System.nanoTime() + wait * 1_000_000 > deadline) {
          throw err;
        }
        sleep(wait);
        continue;
      }
      if (err.refused()) {
        refused.add(at);
        if (refused.containsAll(endpoints)) {
          throw new BeaconException.Unavailable(
              "nothing listens at " + String.join(", ", endpoints)
                  + " (connection refused): start the beacons, or give the client their client ports",
              Status.Code.UNAVAILABLE, "", 0, "", Duration.ZERO, "", err);
        }
      }
      if (!err.retryable() || System.nanoTime() + pause * 1_000_000 > deadline) {
        throw err;
      }
      next();
      sleep((long) (pause * (0.5 + ThreadLocalRandom.current().nextDouble())));
      pause = Math.min(pause * 2, 500);
    }
  }

  /** An attempt's beacon went silent and did not answer a fresh connection either. */
  static final class Hung extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Hung(String at, long silentMs, long probeMs) {
      super("beacon at " + at + " stopped answering: silent for " + silentMs
          + " ms, and a fresh connection got no answer within " + probeMs + " ms");
    }
  }

  /**
   * The result of {@code future}, waited for while its beacon answers: after each half ping
   * interval of silence the beacon is probed on a fresh connection, and one that does not
   * answer ends the wait at once.
   */
  private <T> T watched(String at, ListenableFuture<T> future) {
    long half = Math.max(pingInterval.toMillis() / 2, 50);
    long started = System.nanoTime();
    while (true) {
      try {
        return future.get(half, TimeUnit.MILLISECONDS);
      } catch (TimeoutException e) {
        if (!answers(at, Duration.ofMillis(half))) {
          future.cancel(true);
          throw new Hung(at, (System.nanoTime() - started) / 1_000_000, half);
        }
      } catch (ExecutionException e) {
        throw BeaconException.of(e.getCause(), at);
      } catch (InterruptedException e) {
        future.cancel(true);
        Thread.currentThread().interrupt();
        throw new BeaconException("interrupted");
      }
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new BeaconException("interrupted");
    }
  }

  // -- the registry -----------------------------------------------------------------------

  /** A registration's optional fields. */
  public record RegisterOptions(String metadata, String accessAddr, int workers, boolean snowflake, Consumer<String> onLost) {
    public static RegisterOptions defaults() {
      return new RegisterOptions("", "", 0, false, null);
    }

    public RegisterOptions withMetadata(String m) {
      return new RegisterOptions(m, accessAddr, workers, snowflake, onLost);
    }

    public RegisterOptions withSnowflake() {
      return new RegisterOptions(metadata, accessAddr, workers, true, onLost);
    }

    /** Called once, on a thread of the client's, if the lease is lost. */
    public RegisterOptions onLost(Consumer<String> f) {
      return new RegisterOptions(metadata, accessAddr, workers, snowflake, f);
    }
  }

  /** Registers a service of {@code nodeType} at {@code addr} and keeps its lease alive. */
  public Registration register(String nodeType, String addr, RegisterOptions opts) {
    RegisterRequest req =
        RegisterRequest.newBuilder()
            .setNodeType(nodeType)
            .setAddr(addr)
            .setAccessAddr(opts.accessAddr())
            .setWorkerNum(opts.workers())
            .setMetadata(opts.metadata())
            .build();
    RegisterReply reply = call((ch, o) -> RegistryGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).register(req));
    return new Registration(this, reply, opts.snowflake(), opts.onLost());
  }

  /** {@link #register} on a thread of the client's. */
  public CompletableFuture<Registration> registerAsync(String nodeType, String addr, RegisterOptions opts) {
    return CompletableFuture.supplyAsync(() -> register(nodeType, addr, opts), executor);
  }

  /**
   * The registered services of {@code nodeType} (every type when empty) that {@code health}
   * admits, read in pages of {@code page} (all at once when 0).
   */
  public List<NodeInfo> nodes(String nodeType, HealthFilter health, int page) {
    List<NodeInfo> out = new ArrayList<>();
    int from = 0;
    while (true) {
      NodesRequest req =
          NodesRequest.newBuilder().setNodeType(nodeType).setLimit(page).setFromNodeId(from).setHealth(health).build();
      NodesReply reply = call((ch, o) -> RegistryGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).nodes(req));
      reply.getNodesList().forEach(e -> {
        if (e.hasNode()) {
          out.add(e.getNode());
        }
      });
      if (page == 0 || reply.getNextNodeId() == 0) {
        return out;
      }
      from = reply.getNextNodeId();
    }
  }

  /** Discovery: follows the services of {@code types} that {@code health} admits (see {@link Watch}). */
  public Watch watch(List<String> types, HealthFilter health) {
    Watch w = new Watch(this, types, health);
    w.begin(retryFor);
    return w;
  }

  // -- sequences --------------------------------------------------------------------------

  /** Makes sequence {@code name} (once, usually by an operator); 0 takes the defaults. */
  public void createSequence(String name, long start, long step) {
    beacon.v1.sequence.Sequence.CreateSequence req =
        beacon.v1.sequence.Sequence.CreateSequence.newBuilder().setName(name).setStart(start).setStep(step).build();
    call((ch, o) -> SequencesGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).create(req));
  }

  /** The numbers of sequence {@code name}, from a double buffer of segments. */
  public Sequence sequence(String name) {
    return new Sequence(this, name, 0, 0.2, Duration.ofSeconds(3));
  }

  // -- work assignment --------------------------------------------------------------------

  /** What {@code registration} holds, resources and slots, kept up to date (see {@link Assignments}). */
  public Assignments assignments(Registration registration) {
    Assignments a = new Assignments(this, registration);
    a.begin(retryFor);
    return a;
  }

  /** Makes a group of {@code count} slots held by services of {@code nodeType}. */
  public void createSlotGroup(String name, String nodeType, int count) {
    beacon.v1.assign.Assign.CreateGroup req =
        beacon.v1.assign.Assign.CreateGroup.newBuilder().setName(name).setNodeType(nodeType).setCount(count).build();
    call((ch, o) -> beacon.v1.assign.AssignmentsGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).createGroup(req));
  }

  /** Adds a resource bound to slot {@code slot} of group {@code group}. */
  public void addSlotResource(String name, String group, int slot) {
    beacon.v1.assign.Assign.AddResource req =
        beacon.v1.assign.Assign.AddResource.newBuilder().setName(name).setSlotGroup(group).setSlot(slot).build();
    call((ch, o) -> beacon.v1.assign.AssignmentsGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).add(req));
  }

  /**
   * Waits (at most {@code limit}) until lock {@code name} is this contender's (see {@link
   * Lock}); {@code addr} is the contender's own address, {@code metadata} what others see of
   * it. Close the lock to release it.
   */
  public Lock lock(String name, String addr, String metadata, Duration limit) {
    return Lock.acquire(this, name, addr, metadata, limit);
  }

  // -- task queues ------------------------------------------------------------------------

  /** Task queues: submit, wait for an outcome, and workers. */
  public Tasks tasks() {
    return new Tasks(this);
  }

  // -- config documents -------------------------------------------------------------------

  /** The document {@code key}, or with {@code prefix} every document under it. */
  public List<Document> configGet(String key, boolean prefix) {
    GetRequest req = GetRequest.newBuilder().setKey(key).setPrefix(prefix).build();
    return call((ch, o) -> ConfigsGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).get(req)).getDocumentsList();
  }

  /**
   * Writes document {@code key}; with {@code ifRevision} (not null) only if it is at that
   * revision (0: only if it does not exist). Returns the write's revision.
   */
  public long configPut(String key, byte[] value, Long ifRevision) {
    return configWrite(key, ifRevision, Op.newBuilder().setKey(key).setValue(ByteString.copyFrom(value)).build());
  }

  /** {@link #configPut} on a thread of the client's. */
  public CompletableFuture<Long> configPutAsync(String key, byte[] value, Long ifRevision) {
    return CompletableFuture.supplyAsync(() -> configPut(key, value, ifRevision), executor);
  }

  /** Deletes document {@code key}; returns the delete's revision. */
  public long configDelete(String key, Long ifRevision) {
    return configWrite(key, ifRevision, Op.newBuilder().setKey(key).setDelete(true).build());
  }

  private long configWrite(String key, Long ifRevision, Op op) {
    WriteRequest.Builder b = WriteRequest.newBuilder().addOps(op);
    if (ifRevision != null) {
      b.addChecks(beacon.v1.configs.ConfigsOuterClass.Check.newBuilder().setKey(key).setRevision(ifRevision));
    }
    WriteRequest req = b.build();
    return call((ch, o) -> ConfigsGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).write(req)).getRevision();
  }

  /** Follows the documents under {@code prefixes} (see {@link ConfigWatch}). */
  public ConfigWatch configWatch(List<String> prefixes) {
    ConfigWatch w = new ConfigWatch(this, prefixes);
    w.begin(retryFor);
    return w;
  }

  @Override
  public void close() {
    List<ManagedChannel> all;
    synchronized (lock) {
      closed = true;
      all = new ArrayList<>(channels.values());
      channels.clear();
    }
    for (ManagedChannel ch : all) {
      ch.shutdownNow();
    }
    executor.shutdownNow();
  }
}
