"""Real beacon processes for the client's tests: a cluster of N beacons on free loopback
ports, each from its own config file and data directory, with helpers to kill, stop and
restart one. The binary is $BEACON_BIN, else the repository's target/debug/beacon."""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import socket
import subprocess
import time

import pytest

from beacon_client import Client

ROOT = pathlib.Path(__file__).resolve().parents[3]
BEACON = os.environ.get("BEACON_BIN") or str(ROOT / "target" / "debug" / "beacon")


def port_range() -> tuple[int, int] | None:
    """The ports tests may open: $BEACON_TEST_PORTS (`LOW-HIGH`), as the Rust test kit reads
    it, else None (the kernel picks)."""
    value = os.environ.get("BEACON_TEST_PORTS")
    if not value:
        return None
    try:
        low, high = (int(p) for p in value.split("-"))
    except ValueError:
        raise RuntimeError(f"BEACON_TEST_PORTS={value}: give a range LOW-HIGH") from None
    if low < 1024 or high < low + 100:
        raise RuntimeError(f"BEACON_TEST_PORTS={value}: at least 100 ports from 1024")
    return low, high


def free_ports(n: int) -> list[int]:
    """`n` loopback ports free a moment ago, from `port_range()` when it is set."""
    limits = port_range()
    socks = []
    try:
        tries = 0
        while len(socks) < n:
            tries += 1
            if tries > 10_000:
                raise RuntimeError(f"no {n} free ports in {limits}")
            port = 0 if limits is None else random.randrange(limits[0], limits[1] - 88)
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        return sorted(s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listens on port {port}")


class Cluster:
    """N beacons in one cluster (quorum mode from 3), tick 100 ms."""

    def __init__(self, tmp: pathlib.Path, n: int, extra: dict | None = None):
        if not pathlib.Path(BEACON).exists():
            raise RuntimeError(f"no beacon binary at {BEACON}: build it (cargo build) or set BEACON_BIN")
        self.tmp = tmp
        self.ports = free_ports(n)
        self.addrs = [f"127.0.0.1:{p}" for p in self.ports]
        self.procs: list[subprocess.Popen | None] = [None] * n
        self.configs = []
        for i, port in enumerate(self.ports):
            config = {
                "cluster": "pytest",
                "node": self.addrs[i],
                "beacon": self.addrs,
                "tick_ms": 100,
                "data_dir": str(tmp / f"data-{port}"),
                "admin": "off",
                **(extra or {}),
            }
            path = tmp / f"beacon-{port}.json"
            path.write_text(json.dumps(config))
            self.configs.append(path)
        for i in range(n):
            self.start(i)
        for port in self.ports:
            wait_port(port)
        self.wait_leader()

    def start(self, i: int) -> None:
        log = open(self.tmp / f"beacon-{self.ports[i]}.log", "ab")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        self.procs[i] = subprocess.Popen(
            [BEACON, "--config", str(self.configs[i])], stdout=log, stderr=log, env=env)

    def restart(self, i: int) -> None:
        self.start(i)
        wait_port(self.ports[i])

    def kill(self, i: int) -> None:
        p = self.procs[i]
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def stop(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGSTOP)

    def cont(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGCONT)

    def client(self, **kwargs) -> Client:
        return Client(self.addrs, **kwargs)

    def leader(self, timeout: float = 10.0) -> int:
        """The index of the beacon that leads (as a live beacon says)."""
        return self.wait_leader(timeout)

    def wait_leader(self, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        with Client(self.addrs, timeout=1.0) as c:
            while time.monotonic() < deadline:
                for i, addr in enumerate(self.addrs):
                    p = self.procs[i]
                    if p is None or p.poll() is not None:
                        continue
                    try:
                        status = c.status(addr)
                    except Exception:
                        continue
                    if status.HasField("leader") and not status.HasField("cannot_write"):
                        return self.addrs.index(status.leader)
                time.sleep(0.05)
        raise TimeoutError("no leader")

    def close(self) -> None:
        for i, p in enumerate(self.procs):
            if p is None:
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGKILL)
                p.wait()

    def log(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:]
            for p in sorted(self.tmp.glob("beacon-*.log")))


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, 3, {"lease_ms": 2000, "id_reuse_delay_ms": 3000})
    yield c
    c.close()


@pytest.fixture
def lone(tmp_path):
    c = Cluster(tmp_path, 1, {"lease_ms": 1000})
    yield c
    c.close()
