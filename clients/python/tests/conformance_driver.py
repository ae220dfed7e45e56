"""Drives the Python client for beacon's client conformance suite (tests/conformance.rs):
commands in on stdin, answers and events out on stdout, one per line, the protocol every
client's driver speaks (docs/clients.md).

Each command line is words separated by spaces; each gets one answer line, `ok ...` or
`err KIND message`. Events that come on their own (a lease lost, a watch's change) are
lines that start with `event`."""

from __future__ import annotations

import sys
import threading
import time

import beacon_client as bc
from beacon_client._pb import registry_pb2

_out = threading.Lock()

KINDS = [
    (bc.TooLarge, "TooLarge"), (bc.Busy, "Busy"), (bc.Compacted, "Compacted"),
    (bc.LeaseLost, "LeaseLost"), (bc.NotFound, "NotFound"), (bc.AlreadyExists, "AlreadyExists"),
    (bc.FailedPrecondition, "FailedPrecondition"), (bc.InvalidArgument, "InvalidArgument"),
    (bc.ResourceExhausted, "ResourceExhausted"), (bc.DeadlineExceeded, "DeadlineExceeded"),
    (bc.Unavailable, "Unavailable"),
]


def say(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def kind(err: Exception) -> str:
    if isinstance(err, bc.BeaconError) and err.reason == "NOT_LEADER":
        return "NotLeader"
    for cls, name in KINDS:
        if isinstance(err, cls):
            return name
    return "Other"


class Driver:
    def __init__(self):
        self.client = None
        self.regs = {}
        self.seqs = {}
        self.watches = []

    def follow(self, watch, line) -> None:
        def run():
            try:
                for event in watch:
                    say(line(event))
            except Exception:  # the watch ended: nothing more to tell
                return
        threading.Thread(target=run, daemon=True).start()
        self.watches.append(watch)

    def run(self, words: list[str]) -> str:
        cmd, args = words[0], words[1:]
        arg = lambda i: args[i] if i < len(args) else ""  # noqa: E731
        if cmd != "connect" and self.client is None:
            raise ValueError("connect first")
        if cmd == "connect":
            kwargs = {"retry_for": int(arg(1)) / 1000} if arg(1) else {}
            self.client = bc.Client(arg(0).split(","), **kwargs)
            return ""
        if cmd == "register":
            box = []
            reg = self.client.register(arg(0), arg(1), metadata=arg(2),
                                       on_lost=lambda why: say(f"event lost {box[0]} {one_line(why)}"))
            box.append(reg.node_id)
            self.regs[reg.node_id] = reg
            return f"{reg.node_id} {reg.fencing_token[0]} {reg.fencing_token[1]} {reg.lease_ms}"
        if cmd == "holds":
            return "true" if self.regs[int(arg(0))].holds() else "false"
        if cmd == "unregister":
            self.regs.pop(int(arg(0))).close()
            return ""
        if cmd == "watch":
            watch = self.client.watch([arg(1)], health="any")
            # Answered once it is listed: what commits after the answer comes as a change.
            watch.wait_listed(30)
            ident = arg(0)
            self.follow(watch, lambda e: f"event node {ident} {e[0]} {e[1].node_id}")
            return ""
        if cmd == "numbers":
            seq = self.seqs.get(arg(0))
            if seq is None:
                try:
                    self.client.create_sequence(arg(0), step=int(arg(2) or 0))
                except bc.AlreadyExists:
                    pass
                seq = self.seqs[arg(0)] = self.client.sequence(arg(0))
            return " ".join(str(seq.next()) for _ in range(int(arg(1))))
        if cmd == "config_watch":
            watch = self.client.config_watch([arg(1)])
            watch.wait_listed(30)
            ident = arg(0)

            def line(e):
                what, doc = e
                if what == "deleted":
                    return f"event config {ident} deleted {doc.key}"
                return f"event config {ident} put {doc.key} {doc.revision} {doc.value.decode()}"
            self.follow(watch, line)
            return ""
        if cmd == "config_put":
            return str(self.client.config_put(arg(0), arg(1)))
        if cmd == "put_large":
            self.client.config_put(arg(0), b"\0" * int(arg(1)))
            return ""
        if cmd == "bench":
            if arg(0) not in ("alloc", "renew"):
                raise ValueError(f"bench alloc|renew, not {arg(0)!r}")
            return bench(self.client, arg(0), float(arg(1)), int(arg(2)))
        if cmd == "quit":
            for w in self.watches:
                w.close()
            for reg in self.regs.values():
                reg.close()
            for seq in self.seqs.values():
                seq.close()
            self.client.close()
            raise EOFError
        raise ValueError(f"unknown command {cmd!r}")


def bench_addr(caller: int, n: int) -> str:
    """The address of a `bench` command's registration `n` of `caller`: distinct for each
    pair (and from the cases' addresses, under 10.0)."""
    hi = n // 60_000
    return f"10.{100 + caller % 150}.{hi // 256 % 256}.{hi % 256}:{1024 + n % 60_000}"


def bench(client: bc.Client, what: str, secs: float, callers: int) -> str:
    """`callers` threads sharing the client for `secs`: `alloc` allocates node IDs
    (`Register` through the client's call path, with its failover and back-off), `renew`
    renews one registration each with reports back to back on a `KeepAlive` stream of its
    own. Answers `DONE ERRORS P50_US P99_US`."""
    deadline = time.monotonic() + secs
    took: list[int] = []
    errors = [0]
    lock = threading.Lock()

    def alloc(caller: int) -> None:
        n, mine, failed = 0, [], 0
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                client.call("registry", "Register", registry_pb2.RegisterRequest(
                    node_type="BENCH", addr=bench_addr(caller, n)))
                mine.append(int((time.perf_counter() - started) * 1e6))
            except bc.BeaconError:
                failed += 1
            n += 1
        with lock:
            took.extend(mine)
            errors[0] += failed

    def renew(caller: int) -> None:
        mine = []
        try:
            node = client.call("registry", "Register", registry_pb2.RegisterRequest(
                node_type="BENCH", addr=bench_addr(caller, 1 << 24))).node
            report = registry_pb2.NodeReport(node_id=node.node_id, addr=node.addr,
                                             term=node.term, index=node.index)
            answered = threading.Semaphore(0)
            sent = [0.0]

            def reports():
                while time.monotonic() < deadline:
                    sent[0] = time.perf_counter()
                    yield report
                    answered.acquire()

            for _ in client.stub("registry").KeepAlive(reports(), metadata=client.metadata):
                mine.append(int((time.perf_counter() - sent[0]) * 1e6))
                answered.release()
        except Exception:  # noqa: BLE001  a broken stream is one error; the figures say it
            with lock:
                errors[0] += 1
        with lock:
            took.extend(mine)

    threads = [threading.Thread(target=alloc if what == "alloc" else renew, args=(c,))
               for c in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took.sort()

    def at(q: float) -> int:
        return took[min(int(len(took) * q), len(took) - 1)] if took else 0
    return f"{len(took)} {errors[0]} {at(0.5)} {at(0.99)}"


def main() -> None:
    driver = Driver()
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            answer = driver.run(words)
        except EOFError:
            say("ok")
            return
        except Exception as e:  # every failure is an answer: the suite reads its kind
            say(f"err {kind(e)} {one_line(e)}")
            continue
        say(f"ok {answer}" if answer else "ok")


if __name__ == "__main__":
    main()
