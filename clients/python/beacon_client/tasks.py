"""Task queues: a worker loop on the `Serve` stream, and waiting for a task's outcome."""

from __future__ import annotations

import collections
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import grpc

from . import errors
from ._pb import tasks_pb2

FINISHED = {"completed", "failed", "dead", "cancelled"}


# How many attempts that ended here a worker remembers (see Worker._ended).
ENDED_KEPT = 4096

class TaskFailure(Exception):
    """Raised by a handler: the attempt failed; with `retry`, the task runs again later
    (until its attempts are used up), otherwise it fails for good."""

    def __init__(self, message: str, retry: bool = True):
        super().__init__(message)
        self.retry = retry


class Worker:
    """Serves `queues` on `registration`, `capacity` tasks at once: each task the leader
    starts on it goes to `handler(task)` on a thread of its own; the returned bytes complete
    the task, a raised `TaskFailure` (or any exception, retried) fails the attempt. Tasks
    taken away (timed out, cancelled, the lease lost) are in `lost`. The stream is opened
    again on another beacon when it breaks; `stop()` ends the worker. `completed` counts
    accepted results."""

    def __init__(self, client, registration, queues: list[str], handler: Callable,
                 capacity: int = 1):
        self.client = client
        self.registration = registration
        self.queues = queues
        self.handler = handler
        self.capacity = capacity
        self.completed = 0
        self.refused: list = []
        self.lost: list = []
        self._pool = ThreadPoolExecutor(max_workers=capacity, thread_name_prefix="beacon-task")
        self._running: set[tuple[str, str, int, int]] = set()
        # Attempts whose handler ran to its end here, the latest ENDED_KEPT: the leader may
        # list one as running here again while its report is on its way (a new leader
        # answering the stream before the report reached it); it is not run twice.
        self._ended: collections.OrderedDict[tuple[str, str, int, int], None] = (
            collections.OrderedDict())
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._outbox: queue.Queue | None = None
        self._call = None
        self._thread = threading.Thread(target=self._run, name="beacon-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._outbox is not None:
            self._outbox.put(None)
        if self._call is not None:
            self._call.cancel()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        reg = self.registration
        work = tasks_pb2.Work(node_id=reg.node_id, term=reg.fencing_token[0],
                              index=reg.fencing_token[1], queues=self.queues,
                              capacity=self.capacity)
        pause = 0.01
        while not self._stop.is_set() and not reg.lost.is_set():
            outbox: queue.Queue = queue.Queue()
            self._outbox = outbox

            def requests():
                yield tasks_pb2.WorkerRequest(work=work)
                while True:
                    item = outbox.get()
                    if item is None:
                        return
                    yield item

            try:
                self._call = self.client.stub("tasks").Serve(
                    requests(), metadata=self.client.metadata)
                for event in self._call:
                    kind = event.WhichOneof("event")
                    if kind == "start":
                        self._begin(event.start.running, outbox)
                    elif kind == "notice":
                        self._begin(event.notice.started, outbox)
                        self.lost.extend(event.notice.lost)
                    elif kind == "reported":
                        with self._lock:
                            if event.reported.task.state == "completed":
                                self.completed += 1
                    elif kind == "refused":
                        self.refused.append(errors.from_reply(event.refused))
                    pause = 0.01
            except grpc.RpcError as e:
                if self._stop.is_set():
                    return
                err = errors.from_rpc_error(e)
                if isinstance(err, errors.LeaseLost):
                    return
            outbox.put(None)
            self.client.next_beacon()
            self._stop.wait(pause)
            pause = min(pause * 2, 0.5)

    def _begin(self, tasks, outbox: queue.Queue) -> None:
        for task in tasks:
            key = (task.queue, task.name, task.run.term, task.run.index)
            with self._lock:
                if key in self._running or key in self._ended:
                    continue
                self._running.add(key)
            self._pool.submit(self._attempt, task, key, outbox)

    def _attempt(self, task, key, outbox: queue.Queue) -> None:
        try:
            result = self.handler(task)
            if isinstance(result, str):
                result = result.encode()
            report = tasks_pb2.WorkerRequest(complete=tasks_pb2.Complete(
                queue=task.queue, name=task.name, term=task.run.term, index=task.run.index,
                result=result or b""))
        except TaskFailure as f:
            report = tasks_pb2.WorkerRequest(fail=tasks_pb2.Fail(
                queue=task.queue, name=task.name, term=task.run.term, index=task.run.index,
                error=str(f), retry=f.retry))
        except Exception as e:  # a handler's bug: the attempt failed, and is retried
            report = tasks_pb2.WorkerRequest(fail=tasks_pb2.Fail(
                queue=task.queue, name=task.name, term=task.run.term, index=task.run.index,
                error=f"{type(e).__name__}: {e}", retry=True))
        finally:
            with self._lock:
                self._running.discard(key)
                self._ended[key] = None
                if len(self._ended) > ENDED_KEPT:
                    self._ended.popitem(last=False)
        if self._outbox is outbox:
            outbox.put(report)
        else:
            # The stream was opened again meanwhile: report on its own.
            which = report.WhichOneof("request")
            method = "Complete" if which == "complete" else "Fail"
            try:
                self.client.call("tasks", method, getattr(report, which))
                if which == "complete":
                    with self._lock:
                        self.completed += 1
            except errors.BeaconError as e:
                self.refused.append(e)


def wait(client, queue_name: str, name: str, timeout: float):
    """Waits for task `name` of `queue_name` to finish (the leader's stream of the queue's
    finished tasks, opened again on another beacon if it breaks)."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise errors.DeadlineExceeded(
                f"task `{name}` of `{queue_name}` did not finish within {timeout} s")
        try:
            stream = client.stub("tasks").WatchQueue(
                tasks_pb2.WatchQueue(queue=queue_name, names=[name]), timeout=left,
                metadata=client.metadata)
            for event in stream:
                kind = event.WhichOneof("event")
                found = event.start.finished if kind == "start" else event.notice.finished
                for task in found:
                    if task.name == name:
                        stream.cancel()
                        return task
                if kind == "start" and name in event.start.unknown:
                    stream.cancel()
                    raise errors.NotFound(f"queue `{queue_name}` has no task `{name}`")
        except grpc.RpcError as e:
            err = errors.from_rpc_error(e)
            if isinstance(err, errors.DeadlineExceeded) or not err.retryable:
                raise err from None
        client.next_beacon()
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
