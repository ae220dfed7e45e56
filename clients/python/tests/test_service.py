"""A Python service against three real beacons: it registers, keeps its lease through a
leader kill, is told when its lease is lost, discovers peers, takes sequence and snowflake
IDs, holds a slot and works tasks."""

from __future__ import annotations

import queue
import threading
import time

import grpc
import pytest

import beacon_client as bc
from beacon_client._pb import assign_pb2, registry_pb2


def until(predicate, timeout: float = 10.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} did not hold within {timeout} s")


def test_a_registration_keeps_its_lease_through_a_leader_kill(cluster):
    client = cluster.client()
    lost = []
    reg = client.register("LOGIC", "10.0.0.5:8080", metadata={"zone": "b"}, on_lost=lost.append)
    assert reg.node_id >= 1 and reg.fencing_token[0] >= 1
    leader = cluster.leader()
    cluster.kill(leader)
    # Three leases (2 s each) later, the registration still holds, with its ID and token.
    time.sleep(3 * reg.lease_ms / 1000)
    assert not lost, lost
    assert reg.holds()
    survivor = cluster.client()
    nodes = {n.node_id: n for n in survivor.nodes("LOGIC")}
    assert nodes[reg.node_id].addr == "10.0.0.5:8080"
    assert nodes[reg.node_id].fencing_token == reg.fencing_token
    reg.close()
    assert reg.node_id not in {n.node_id for n in survivor.nodes("LOGIC") if n.is_online}


def test_the_service_is_told_when_the_leader_ends_its_registration(cluster):
    client = cluster.client()
    told = threading.Event()
    reasons = []
    reg = client.register("LOGIC", "10.0.0.7:8080", on_lost=lambda why: (reasons.append(why), told.set()))
    events: queue.Queue = queue.Queue()
    held = client.assignments(reg, on_change=events.put)
    until(lambda: held.index > 0, what="the assignments watch to start")
    # An operator ends it from outside, naming it by its fencing token.
    client.call("registry", "Unregister", registry_pb2.UnregisterRequest(
        node_id=reg.node_id, term=reg.fencing_token[0], index=reg.fencing_token[1]))
    assert told.wait(10), "the service was not told"
    assert "NO_LEASE" in reasons[0] or "NOT_HOLDER" in reasons[0], reasons
    assert not reg.holds()
    # What it held is told lost once, and the watch ends.
    assert events.get(timeout=10).kind == "lost"
    held._thread.join(10)
    assert not held._thread.is_alive()
    assert events.empty(), drain(events)


def test_a_stopped_beacon_costs_the_service_its_lease_no_later_than_the_leader(lone):
    client = lone.client(timeout=0.5)
    told = threading.Event()
    reg = client.register("LOGIC", "10.0.0.8:8080", on_lost=lambda why: told.set())
    time.sleep(0.5)
    assert reg.holds()
    lone.stop(0)
    started = time.monotonic()
    try:
        assert told.wait(5), "a lease nobody confirms was not given up"
        took = time.monotonic() - started
        # Given up within a lease (1 s) and a report interval of the last confirmation.
        assert took <= reg.lease_ms / 1000 + 0.5, took
        assert "no beacon confirmed" in reg.lost_reason
    finally:
        lone.cont(0)


def test_discovery_follows_changes_across_a_leader_kill(cluster):
    client = cluster.client()
    first = client.register("LOGGER", "10.0.1.1:7000")
    watch = client.watch(["LOGGER"])
    kind, node = watch.next(timeout=10)
    assert (kind, node.addr) == ("present", "10.0.1.1:7000")
    # One node type everywhere: a watch's nodes are what a listing gives.
    [listed] = client.nodes("LOGGER")
    assert isinstance(node, bc.Node) and isinstance(listed, bc.Node)
    assert (node.node_id, node.fencing_token) == (listed.node_id, listed.fencing_token)
    assert node == listed and listed.is_online and node.meta == {}
    second = client.register("LOGGER", "10.0.1.2:7000")
    kind, node = watch.next(timeout=10)
    assert (kind, node.addr) == ("added", "10.0.1.2:7000")
    # Every beacon holds what was committed (a heartbeat or two), then the leader dies. While
    # the watch finds the next one a service comes and goes: the watch resumes from the index
    # after the last it heard and hears it come and go, where listing again would miss it.
    time.sleep(0.5)
    cluster.kill(cluster.leader())
    third = client.register("LOGGER", "10.0.1.3:7000")
    brief = client.register("LOGGER", "10.0.1.4:7000")
    brief.close()
    seen = [watch.next(timeout=15) for _ in range(3)]
    assert [(k, n.addr) for k, n in seen] == [
        ("added", "10.0.1.3:7000"), ("added", "10.0.1.4:7000"), ("removed", "10.0.1.4:7000"),
    ], seen
    assert watch.resumes >= 1 and watch.resyncs == 0, (watch.resumes, watch.resyncs)
    second.close()
    kind, node = watch.next(timeout=15)
    assert (kind, node.addr) == ("removed", "10.0.1.2:7000")
    # Nothing was told twice.
    with pytest.raises(queue.Empty):
        watch.next(timeout=0.5)
    watch.close()
    first.close()
    third.close()


def test_sequence_numbers_are_unique_across_threads_and_a_leader_kill(cluster):
    client = cluster.client()
    client.create_sequence("orders", step=100)
    seq = client.sequence("orders")
    taken: list[int] = []
    lock = threading.Lock()

    def take(n):
        mine = [seq.next() for _ in range(n)]
        with lock:
            taken.extend(mine)

    threads = [threading.Thread(target=take, args=(2000,)) for _ in range(4)]
    for t in threads:
        t.start()
    cluster.kill(cluster.leader())
    for t in threads:
        t.join()
    take(500)
    assert len(taken) == len(set(taken)) == 8500
    # Segments were fetched ahead: far fewer fetches than numbers.
    assert 85 <= seq.fetches <= 200, seq.fetches
    seq.close()


def test_snowflake_ids_are_unique_and_decode_to_the_node_id(cluster):
    client = cluster.client()
    reg = client.register("ORDERS", "10.0.2.1:9000", snowflake=True)
    flake = bc.Snowflake(reg)
    ids = [flake.next_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    parts = bc.decode(ids[-1])
    assert parts["worker"] == reg.node_id
    assert abs(parts["ms"] - time.time() * 1000) < 5000
    reg.close(last_clock_ms=flake.last_ms)
    # The next holder of the node ID starts after the last timestamp used.
    again = client.register("ORDERS", "10.0.2.2:9000", snowflake=True)
    if again.node_id == reg.node_id:
        assert again.clock_floor_ms >= flake.last_ms
    again.close()


def drain(events: queue.Queue) -> list:
    out = []
    while not events.empty():
        out.append(events.get())
    return out


def test_a_slot_goes_to_the_standby_when_its_holder_ends(cluster):
    client = cluster.client()
    client.call("assignments", "CreateGroup", assign_pb2.CreateGroup(name="robots", node_type="ROBOT", count=1))
    client.call("assignments", "Add", assign_pb2.AddResource(name="arm-0", slot_group="robots", slot=0))
    events_a: queue.Queue = queue.Queue()
    events_b: queue.Queue = queue.Queue()
    a = client.register("ROBOT", "10.0.3.1:9000")
    held_a = client.assignments(a, on_change=events_a.put)
    granted = until(lambda: held_a.slots.get("robots"), what="the slot to go to the first")
    assert granted.slot == 0
    until(lambda: "arm-0" in held_a.resources, what="the bound resource to follow the slot")
    b = client.register("ROBOT", "10.0.3.2:9000")
    held_b = client.assignments(b, on_change=events_b.put)
    time.sleep(0.5)
    assert not held_b.slots, "the standby holds nothing while the slot's holder lives"
    # The leader dies; the watches resume at the next one from where they were.
    cluster.kill(cluster.leader())
    a.close()
    until(lambda: held_b.slots.get("robots"), what="the slot to go to the standby")
    until(lambda: "arm-0" in held_b.resources, what="the resource to move with the slot")
    kinds = []
    while not events_b.empty():
        kinds.append(events_b.get().kind)
    assert "slot_granted" in kinds and "added" in kinds, kinds
    assert held_b.resumes >= 1, "the standby's watch resumed at the new leader"
    # The first holder's registration ended: its watch, resumed at the new leader too, is
    # told that the slot and the resource went, and holds nothing.
    told_a = []
    until(lambda: told_a.extend(drain(events_a))
          or {"slot_gone", "removed"} <= {e.kind for e in told_a},
          what="the ended holder to be told what it lost")
    assert not held_a.slots and not held_a.resources, (held_a.slots, held_a.resources)
    # Its token is the later one.
    assert held_b.slots["robots"].term * 2**48 + held_b.slots["robots"].index > granted.term * 2**48 + granted.index
    held_a.close()
    held_b.close()
    b.close()


def test_a_drained_slot_holder_lets_its_slot_go_to_the_standby(cluster):
    client = cluster.client()
    client.call("assignments", "CreateGroup", assign_pb2.CreateGroup(name="arms", node_type="ARM", count=1))
    events_a: queue.Queue = queue.Queue()
    a = client.register("ARM", "10.0.4.1:9000")
    held_a = client.assignments(a, on_change=events_a.put)
    until(lambda: held_a.slots.get("arms"), what="the slot to go to the first")
    b = client.register("ARM", "10.0.4.2:9000")
    held_b = client.assignments(b)
    assert client.holds(a.node_id) == ["slot arms/0"]
    # The operator drains the holder: it is asked to let the slot go, and does.
    client.drain(a.node_id, note="maintenance")
    told = []
    until(lambda: told.extend(drain(events_a)) or "slot_revoking" in {e.kind for e in told},
          what="the drained holder to be asked for its slot")
    held_a.release_slot("arms")
    until(lambda: held_b.slots.get("arms"), what="the slot to go to the standby")
    time.sleep(0.3)
    told.extend(drain(events_a))
    assert [e.kind for e in told].count("slot_gone") == 1, [e.kind for e in told]
    assert client.holds(a.node_id) == [], "nothing is left on the drained one"
    assert client.holds(b.node_id) == ["slot arms/0"]
    assert not a.lost.is_set(), "the drained one keeps its lease"
    held_a.close()
    held_b.close()
    a.close()
    b.close()


def test_a_worker_runs_every_task_once_and_results_come_back(cluster):
    client = cluster.client()
    client.create_queue("thumbs", attempt_timeout_ms=5000)
    reg = client.register("THUMBS", "10.0.4.1:9000")
    ran = []

    def handler(task):
        ran.append(task.name)
        if task.payload == b"bad":
            raise bc.TaskFailure("cannot read it", retry=False)
        return task.payload.upper()

    worker = client.worker(reg, ["thumbs"], handler, capacity=4)
    for i in range(40):
        client.submit("thumbs", f"img-{i}", f"photo {i}".encode())
    client.submit("thumbs", "img-bad", b"bad")
    for i in range(40):
        task = client.wait("thumbs", f"img-{i}", timeout=20)
        assert task.state == "completed" and task.result == f"PHOTO {i}".encode()
    failed = client.wait("thumbs", "img-bad", timeout=20)
    assert failed.state == "failed" and "cannot read it" in failed.error
    assert sorted(ran) == sorted([f"img-{i}" for i in range(40)] + ["img-bad"])
    until(lambda: worker.completed == 40, what="40 accepted results")

    # A submit repeated with its ID (as a retry after a lost answer is) returns the task it
    # made, finished, and runs nothing; a new submit of the name runs it again.
    first = client.submit("thumbs", "img-once", b"once", submit_id=77)
    assert first.submit_id == 77
    assert client.wait("thumbs", "img-once", timeout=20).state == "completed"
    again = client.submit("thumbs", "img-once", b"once", submit_id=77)
    assert (again.state, again.seq) == ("completed", first.seq)
    anew = client.submit("thumbs", "img-once", b"once")
    assert anew.seq > first.seq and anew.submit_id not in (0, 77)
    assert client.wait("thumbs", "img-once", timeout=20).seq == anew.seq
    until(lambda: ran.count("img-once") == 2, what="the new submit's run")
    worker.stop()
    reg.close()


def test_refusals_are_typed_errors(cluster):
    client = cluster.client(retry_for=0.5)
    with pytest.raises(bc.NotFound) as e:
        client.sequence("no-such-sequence")
    assert e.value.reason == "UNKNOWN_SEQUENCE" and e.value.beacon_code == 30
    client.create_sequence("once", step=10)
    with pytest.raises(bc.AlreadyExists):
        client.create_sequence("once", step=20)
    with pytest.raises(bc.InvalidArgument):
        client.register("LOGIC", "not an address")
    with pytest.raises(bc.NotFound) as e:
        client.call("registry", "Unregister", registry_pb2.UnregisterRequest(node_id=999, term=1, index=1))
    assert e.value.reason == "UNKNOWN_TARGET"
    # A request naming a registration by a token that is not its own changes nothing.
    reg = client.register("LOGIC", "10.0.5.1:8080")
    with pytest.raises(bc.LeaseLost) as e:
        client.call("registry", "Unregister", registry_pb2.UnregisterRequest(
            node_id=reg.node_id, term=reg.fencing_token[0], index=reg.fencing_token[1] + 7))
    assert e.value.status == grpc.StatusCode.FAILED_PRECONDITION and e.value.reason == "NOT_HOLDER"
    assert reg.holds()
    reg.close()


def test_a_stopped_beacon_costs_the_service_nothing(cluster):
    """A beacon that hangs (SIGSTOP: its connections stay open, nothing answers) first in the
    client's list, then the leader: the lease holds throughout (2 s leases, each stop three
    leases long), calls go through the others, and no call waits on the stopped beacon
    longer than the 2 s the client promises (its per-call timeout is 5 s: a call that waited
    for it would take that). A client made afresh with the stopped beacon first answers
    without waiting for it at all."""
    leader = cluster.leader()
    follower = (leader + 1) % 3
    first = [cluster.addrs[follower]] + [a for i, a in enumerate(cluster.addrs) if i != follower]
    client = bc.Client(first, retry_for=20)
    lost = []
    reg = client.register("LOGIC", "10.0.7.1:8080", on_lost=lost.append)

    def slowest_call_while(span: float) -> float:
        """The slowest of the config writes made in a loop for `span` seconds."""
        slowest, end, n = 0.0, time.monotonic() + span, 0
        while time.monotonic() < end:
            n += 1
            started = time.monotonic()
            client.config_put("cluster/probe", str(n))
            slowest = max(slowest, time.monotonic() - started)
        return slowest

    try:
        client.config_put("cluster/probe", "0")
        cluster.stop(follower)
        slowest = slowest_call_while(6)
        assert slowest <= 2.0, f"a call waited {slowest:.2f} s on the stopped follower"
        assert not lost and reg.holds(), (lost, cluster.log())
        assert reg.node_id in {n.node_id for n in client.nodes("LOGIC")}
        cluster.cont(follower)
        leader = cluster.leader()
        cluster.stop(leader)
        time.sleep(6)
        assert not lost and reg.holds(), (lost, cluster.log())
        assert reg.node_id in {n.node_id for n in client.nodes("LOGIC")}
        cluster.cont(leader)
        # A fresh client whose first beacon is stopped registers without waiting for it:
        # it dials the next one after a tenth of a second and takes the first to answer.
        # The stopped one is a follower now (the leadership moved above), and a write has
        # gone through since: what is timed is the client, not a new leader's first write.
        leader = cluster.leader()
        follower = (leader + 1) % 3
        first = [cluster.addrs[follower]] + [
            a for i, a in enumerate(cluster.addrs) if i != follower]
        cluster.stop(follower)
        client.config_put("cluster/probe", "settled")
        started = time.monotonic()
        with bc.Client(first, retry_for=20) as other:
            again = other.register("LOGIC", "10.0.7.2:8080")
            took = time.monotonic() - started
            assert again.holds()
            again.close()
        # It waited neither the call's timeout (5 s) nor a probe of the stopped beacon.
        assert took < 2.0, f"a fresh client took {took:.2f} s past the stopped first beacon"
        cluster.cont(follower)
    finally:
        for i in range(3):
            cluster.cont(i)
        reg.close()


def test_health_from_checks_and_an_operators_drain_take_a_service_out_of_discovery(cluster):
    client = cluster.client()
    db = client.register("HEALTHY", "10.0.7.1:7000")
    web = client.register("HEALTHY", "10.0.7.2:7000")
    watch = client.watch(["HEALTHY"])
    present = {watch.next(timeout=10) for _ in range(2)}
    assert {(k, n.addr, n.status) for k, n in present} == {
        ("present", "10.0.7.1:7000", "passing"), ("present", "10.0.7.2:7000", "passing")}
    # The service's own checks find it failing: the report carries it, the leader writes
    # it, and discovery drops it; every beacon lists it as critical, with why.
    db.set_health("critical", "database unreachable")
    kind, node = watch.next(timeout=10)
    assert (kind, node.node_id, node.status) == ("removed", db.node_id, "critical")
    assert node.health.note == "database unreachable" and node.health.since_ms > 0
    listed = {n.node_id: n for n in client.nodes("HEALTHY")}
    assert listed[db.node_id].status == "critical" and not listed[db.node_id].serving
    assert [n.node_id for n in client.nodes("HEALTHY", health="serving")] == [web.node_id]
    assert [n.node_id for n in client.nodes("HEALTHY", health="critical")] == [db.node_id]
    # The same status again costs no log entry: nothing reaches the watch until it heals.
    db.set_health("critical", "still unreachable")
    db.set_health("passing")
    kind, node = watch.next(timeout=10)
    assert (kind, node.node_id, node.status) == ("added", db.node_id, "passing")
    # An operator drains the other for maintenance: it keeps its ID and its lease.
    drained = client.drain(web.node_id, note="kernel upgrade")
    assert drained.draining and drained.status == "passing"
    kind, node = watch.next(timeout=10)
    assert (kind, node.node_id, node.draining) == ("removed", web.node_id, True)
    assert [n.node_id for n in client.nodes("HEALTHY", health="draining")] == [web.node_id]
    assert web.holds()
    client.undrain(web.node_id)
    kind, node = watch.next(timeout=10)
    assert (kind, node.node_id, node.serving) == ("added", web.node_id, True)
    # What makes no sense is refused with what was wrong, and changes nothing.
    with pytest.raises(ValueError, match="give passing, warning or critical"):
        db.set_health("sick")
    with pytest.raises(ValueError, match="health filter"):
        client.nodes("HEALTHY", health="sick")
    with pytest.raises(bc.NotFound):
        client.set_health(999, "critical")
    watch.close()
    db.close()
    web.close()


def test_a_drained_worker_takes_no_new_task_until_it_is_back(cluster):
    client = cluster.client()
    client.create_queue("drained", attempt_timeout_ms=5000)
    reg = client.register("DRAINED", "10.0.4.9:9000")
    ran = []

    def handler(task):
        ran.append(task.name)
        return b"done"

    worker = client.worker(reg, ["drained"], handler, capacity=2)
    client.submit("drained", "before", b"")
    assert client.wait("drained", "before", timeout=20).state == "completed"
    client.drain(reg.node_id, note="maintenance")
    client.submit("drained", "during", b"")
    # The leader dispatches every tick (100 ms): over many ticks it starts nothing here.
    time.sleep(1.5)
    assert client.task("drained", "during").state == "pending" and ran == ["before"]
    client.undrain(reg.node_id)
    assert client.wait("drained", "during", timeout=20).state == "completed"
    assert ran == ["before", "during"]
    worker.stop()
    reg.close()
