package dev.beacon.client;

import beacon.v1.tasks.TasksGrpc;
import beacon.v1.tasks.TasksOuterClass.Complete;
import beacon.v1.tasks.TasksOuterClass.CreateQueue;
import beacon.v1.tasks.TasksOuterClass.Fail;
import beacon.v1.tasks.TasksOuterClass.QueueEvent;
import beacon.v1.tasks.TasksOuterClass.Submit;
import beacon.v1.tasks.TasksOuterClass.TaskInfo;
import beacon.v1.tasks.TasksOuterClass.WatchQueue;
import beacon.v1.tasks.TasksOuterClass.Work;
import beacon.v1.tasks.TasksOuterClass.WorkerEvent;
import beacon.v1.tasks.TasksOuterClass.WorkerRequest;
import com.google.protobuf.ByteString;
import io.grpc.Context;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** Task queues: submitting, waiting for an outcome, and a worker loop. */
public final class Tasks {
  private final BeaconClient client;

  Tasks(BeaconClient client) {
    this.client = client;
  }

  /** Makes queue {@code name}; made again with the same settings it is as it was. */
  public void createQueue(String name, Duration attemptTimeout, int maxAttempts) {
    CreateQueue req =
        CreateQueue.newBuilder().setName(name).setTimeoutMs(attemptTimeout.toMillis()).setMaxAttempts(maxAttempts).build();
    client.call((ch, o) -> TasksGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).createQueue(req));
  }

  /**
   * Submits task {@code name} with {@code payload}; a task of that name pending or running is
   * returned instead. A submit whose answer a failover lost is retried with the same random
   * ID, so it counts once.
   */
  public TaskInfo submit(String queue, String name, byte[] payload) {
    long id = 0;
    while (id == 0) {
      id = ThreadLocalRandom.current().nextLong();
    }
    Submit req =
        Submit.newBuilder().setQueue(queue).setName(name).setPayload(ByteString.copyFrom(payload)).setSubmitId(id).build();
    return client.call((ch, o) -> TasksGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).submit(req)).getTask();
  }

  /**
   * Completes once task {@code name} of {@code queue} has finished (its state {@code
   * completed}, {@code failed}, {@code dead} or {@code cancelled}), waiting at most {@code
   * timeout}: the leader's stream of the queue's finished tasks, on a thread of the client's.
   */
  public CompletableFuture<TaskInfo> waitFor(String queue, String name, Duration timeout) {
    return CompletableFuture.supplyAsync(() -> waitBlocking(queue, name, timeout), client.executor());
  }

  private TaskInfo waitBlocking(String queue, String name, Duration timeout) {
    WatchQueue req = WatchQueue.newBuilder().setQueue(queue).addNames(name).build();
    long deadline = System.nanoTime() + timeout.toNanos();
    long pause = 10;
    while (true) {
      long left = (deadline - System.nanoTime()) / 1_000_000;
      if (left <= 0) {
        throw new BeaconException.DeadlineExceeded(
            "task `" + name + "` of `" + queue + "` did not finish within " + timeout.toMillis() + " ms",
            io.grpc.Status.Code.DEADLINE_EXCEEDED, "", 0, "", Duration.ZERO, "", null);
      }
      client.connect(Duration.ofMillis(Math.min(left, client.timeout.toMillis())));
      String at = client.current();
      try {
        Iterator<QueueEvent> it =
            TasksGrpc.newBlockingStub(client.channel(at)).withDeadlineAfter(left, TimeUnit.MILLISECONDS).watchQueue(req);
        while (it.hasNext()) {
          QueueEvent ev = it.next();
          if (ev.hasStart() && ev.getStart().getUnknownList().contains(name)) {
            throw new BeaconException.NotFound(
                "queue `" + queue + "` has no task `" + name + "`",
                io.grpc.Status.Code.NOT_FOUND, "", 0, "", Duration.ZERO, at, null);
          }
          List<TaskInfo> done = ev.hasStart() ? ev.getStart().getFinishedList() : ev.getNotice().getFinishedList();
          for (TaskInfo task : done) {
            if (task.getName().equals(name)) {
              return task;
            }
          }
        }
      } catch (io.grpc.StatusRuntimeException e) {
        BeaconException err = BeaconException.of(e, at);
        if (!err.retryable() && !err.silent()) {
          throw err;
        }
      }
      // The stream broke (a leader change, a beacon gone): the next beacon, after a pause.
      client.next();
      BeaconClient.sleep(pause);
      pause = Math.min(pause * 2, 500);
    }
  }

  /** What a handler throws to fail an attempt: with {@code retry} the task runs again later. */
  public static final class TaskFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final boolean retry;

    public TaskFailure(String message, boolean retry) {
      super(message);
      this.retry = retry;
    }

    public boolean retry() {
      return retry;
    }
  }

  /** Runs one task: its result completes the task; an exception fails the attempt. */
  @FunctionalInterface
  public interface Handler {
    byte[] run(TaskInfo task) throws Exception;
  }

  /**
   * A worker serving {@code queues} on {@code registration}, {@code capacity} tasks at once,
   * over the Serve stream (opened again on another beacon when it breaks); close it to stop.
   */
  public Worker worker(Registration registration, List<String> queues, int capacity, Handler handler) {
    return new Worker(registration, queues, Math.max(capacity, 1), handler);
  }

  /** See {@link Tasks#worker}. */
  public final class Worker implements AutoCloseable {
    private final Registration reg;
    private final Work work;
    private final Handler handler;
    private final ExecutorService pool;
    private final Thread loop;
    private final Set<String> running = new LinkedHashSet<>();
    private final Set<String> ended = new LinkedHashSet<>();
    private final AtomicInteger completed = new AtomicInteger();
    private final List<TaskInfo> lost = new ArrayList<>();
    private volatile boolean stopping;
    private volatile StreamObserver<WorkerRequest> outbox;

    Worker(Registration reg, List<String> queues, int capacity, Handler handler) {
      this.reg = reg;
      this.handler = handler;
      this.work =
          Work.newBuilder()
              .setNodeId(reg.nodeId())
              .setTerm(reg.fencingToken().term())
              .setIndex(reg.fencingToken().index())
              .addAllQueues(queues)
              .setCapacity(capacity)
              .build();
      this.pool =
          Executors.newFixedThreadPool(
              capacity,
              r -> {
                Thread t = new Thread(r, "beacon-task");
                t.setDaemon(true);
                return t;
              });
      this.loop = new Thread(this::run, "beacon-worker");
      loop.setDaemon(true);
      loop.start();
    }

    /** How many results the leader accepted. */
    public int completed() {
      return completed.get();
    }

    /** The tasks taken from this worker (timed out, cancelled, the lease lost). */
    public synchronized List<TaskInfo> lost() {
      return new ArrayList<>(lost);
    }

    private void run() {
      long pause = 10;
      while (!stopping && !reg.lost().isDone()) {
        String at = client.current();
        CountDownLatch ended = new CountDownLatch(1);
        Context.CancellableContext ctx = Context.current().withCancellation();
        try {
          ctx.run(
              () -> {
                StreamObserver<WorkerRequest> out =
                    TasksGrpc.newStub(client.channel(at))
                        .serve(
                            new StreamObserver<>() {
                              @Override
                              public void onNext(WorkerEvent ev) {
                                if (ev.hasStart()) {
                                  begin(ev.getStart().getRunningList());
                                } else if (ev.hasNotice()) {
                                  begin(ev.getNotice().getStartedList());
                                  synchronized (Worker.this) {
                                    lost.addAll(ev.getNotice().getLostList());
                                  }
                                } else if (ev.hasReported() && ev.getReported().getTask().getState().equals("completed")) {
                                  completed.incrementAndGet();
                                }
                              }

                              @Override
                              public void onError(Throwable t) {
                                ended.countDown();
                              }

                              @Override
                              public void onCompleted() {
                                ended.countDown();
                              }
                            });
                out.onNext(WorkerRequest.newBuilder().setWork(work).build());
                outbox = out;
              });
          while (!stopping && !reg.lost().isDone() && !ended.await(100, TimeUnit.MILLISECONDS)) {
            // The stream goes on.
          }
        } catch (InterruptedException e) {
          return;
        } finally {
          outbox = null;
          ctx.cancel(null);
        }
        if (stopping) {
          return;
        }
        client.next();
        BeaconClient.sleep(pause);
        pause = Math.min(pause * 2, 500);
      }
    }

    private void begin(List<TaskInfo> tasks) {
      for (TaskInfo t : tasks) {
        String key = t.getQueue() + "/" + t.getName() + "/" + t.getRun().getTerm() + "/" + t.getRun().getIndex();
        synchronized (this) {
          if (running.contains(key) || ended.contains(key)) {
            continue;
          }
          running.add(key);
        }
        pool.submit(() -> attempt(t, key));
      }
    }

    private void attempt(TaskInfo t, String key) {
      WorkerRequest report;
      try {
        byte[] result = handler.run(t);
        report =
            WorkerRequest.newBuilder()
                .setComplete(
                    Complete.newBuilder()
                        .setQueue(t.getQueue())
                        .setName(t.getName())
                        .setTerm(t.getRun().getTerm())
                        .setIndex(t.getRun().getIndex())
                        .setResult(ByteString.copyFrom(result == null ? new byte[0] : result)))
                .build();
      } catch (Exception e) {
        boolean retry = !(e instanceof TaskFailure f) || f.retry();
        report =
            WorkerRequest.newBuilder()
                .setFail(
                    Fail.newBuilder()
                        .setQueue(t.getQueue())
                        .setName(t.getName())
                        .setTerm(t.getRun().getTerm())
                        .setIndex(t.getRun().getIndex())
                        .setError(String.valueOf(e.getMessage()))
                        .setRetry(retry))
                .build();
      }
      synchronized (this) {
        running.remove(key);
        ended.add(key);
        if (ended.size() > 4096) {
          ended.remove(ended.iterator().next());
        }
      }
      StreamObserver<WorkerRequest> out = outbox;
      if (out != null) {
        synchronized (out) {
          out.onNext(report);
        }
        return;
      }
      // No stream now: report on its own.
      WorkerRequest r = report;
      if (r.hasComplete()) {
        client.call((ch, o) -> TasksGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).complete(r.getComplete()));
        completed.incrementAndGet();
      } else {
        client.call((ch, o) -> TasksGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).fail(r.getFail()));
      }
    }

    /** Stops the worker; the handlers under way finish first. */
    @Override
    public void close() {
      stopping = true;
      loop.interrupt();
      try {
        loop.join(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      pool.shutdown();
      try {
        pool.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
