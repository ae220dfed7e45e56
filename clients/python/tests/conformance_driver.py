"""Drives the Python client for beacon's client conformance suite (tests/conformance.rs):
commands in on stdin, answers and events out on stdout, one per line, the protocol every
client's driver speaks (docs/clients.md).

Each command line is words separated by spaces; each gets one answer line, `ok ...` or
`err KIND message`. Events that come on their own (a lease lost, a watch's change) are
lines that start with `event`."""

from __future__ import annotations

import sys
import threading

import beacon_client as bc

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
