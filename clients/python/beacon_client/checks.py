"""Health checks run beside the service, their result reported as its registration's health.

A check answers `(status, note)`: `passing`, `warning` or `critical`, and why. The checks a
registration runs (`Registration.run_checks`) go every `interval` seconds; the worst of
their statuses is the round's. A round's status is reported only once it has held for
`threshold` rounds in a row (hysteresis), so one slow answer does not take a service out of
discovery; the leader then damps a service that still flaps (see docs/registry.md)."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from typing import Callable

import grpc

ORDER = {"passing": 0, "warning": 1, "critical": 2}


class Check:
    """One check: `run()` returns `(status, note)`."""

    name = "check"

    def run(self) -> tuple[str, str]:
        raise NotImplementedError


class TcpCheck(Check):
    """Passing when a TCP connection to `addr` (`host:port`) opens within `timeout`."""

    def __init__(self, addr: str, timeout: float = 1.0):
        host, _, port = addr.rpartition(":")
        self.host, self.port, self.timeout = host.strip("[]"), int(port), timeout
        self.name = f"tcp {addr}"

    def run(self) -> tuple[str, str]:
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout):
                return "passing", ""
        except OSError as e:
            return "critical", f"{self.name}: {e}"


class HttpCheck(Check):
    """An HTTP GET of `url`: 2xx is passing, 429 warning, anything else (or no answer
    within `timeout`) critical."""

    def __init__(self, url: str, timeout: float = 1.0):
        self.url, self.timeout = url, timeout
        self.name = f"http {url}"

    def run(self) -> tuple[str, str]:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as answer:
                code = answer.status
        except urllib.error.HTTPError as e:
            code = e.code
        except (urllib.error.URLError, OSError) as e:
            return "critical", f"{self.name}: {e}"
        if 200 <= code < 300:
            return "passing", ""
        if code == 429:
            return "warning", f"{self.name}: {code}"
        return "critical", f"{self.name}: {code}"


class GrpcCheck(Check):
    """The standard gRPC health check (`grpc.health.v1.Health/Check`) of `service` ("" for
    the whole server) at `target`: SERVING is passing, anything else critical."""

    def __init__(self, target: str, service: str = "", timeout: float = 1.0):
        self.target, self.service, self.timeout = target, service, timeout
        self.name = f"grpc {target}" + (f" {service}" if service else "")

    def run(self) -> tuple[str, str]:
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        try:
            with grpc.insecure_channel(self.target) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                answer = stub.Check(health_pb2.HealthCheckRequest(service=self.service),
                                    timeout=self.timeout)
        except grpc.RpcError as e:
            return "critical", f"{self.name}: {e.code().name}"
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
        if answer.status == health_pb2.HealthCheckResponse.SERVING:
            return "passing", ""
        return "critical", f"{self.name}: {status}"


class CallbackCheck(Check):
    """The service's own check: `fn()` returns a status, or `(status, note)`; an exception
    is critical, with its text."""

    def __init__(self, fn: Callable[[], str | tuple[str, str]], name: str = "callback"):
        self.fn, self.name = fn, name

    def run(self) -> tuple[str, str]:
        try:
            got = self.fn()
        except Exception as e:  # the check's failure is the finding
            return "critical", f"{self.name}: {e}"
        status, note = (got, "") if isinstance(got, str) else got
        if status not in ORDER:
            return "critical", f"{self.name}: {status!r} is not passing, warning or critical"
        return status, note


def worst(results: list[tuple[str, str]]) -> tuple[str, str]:
    """The worst status of a round, with the notes of the checks that found it."""
    if not results:
        return "passing", ""
    status = max((s for s, _ in results), key=ORDER.__getitem__)
    notes = [n for s, n in results if s == status and n]
    return status, "; ".join(notes)


class Hysteresis:
    """Reports a status only once it has held for `threshold` rounds in a row."""

    def __init__(self, threshold: int, initial: str = "passing"):
        if threshold < 1:
            raise ValueError(f"threshold {threshold}: at least 1 round")
        self.threshold = threshold
        self.published = initial
        self._candidate = initial
        self._held = 0

    def observe(self, status: str) -> bool:
        """Takes one round's status; whether it is now the one to report."""
        if status == self.published:
            self._candidate, self._held = status, 0
            return False
        if status != self._candidate:
            self._candidate, self._held = status, 0
        self._held += 1
        if self._held >= self.threshold:
            self.published, self._held = status, 0
            return True
        return False


class Checker:
    """Runs `checks` every `interval` seconds on a thread of its own and calls
    `report(status, note)` when the round's status has held for `threshold` rounds."""

    def __init__(self, checks: list[Check], report: Callable[[str, str], None], *,
                 interval: float = 1.0, threshold: int = 3):
        if not checks:
            raise ValueError("no checks to run")
        if interval <= 0:
            raise ValueError(f"interval {interval}: more than 0 seconds")
        self.checks, self.report, self.interval = checks, report, interval
        self.hysteresis = Hysteresis(threshold)
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="beacon-checks", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            status, note = worst([c.run() for c in self.checks])
            self.rounds += 1
            if self.hysteresis.observe(status):
                self.report(status, note)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)
