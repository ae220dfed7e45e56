"""What any gRPC tool sees: reflection lists the services without the .proto files,
health answers per service, bad calls get their status while the beacon serves on, and
reads are linearizable unless the call asks for serializable."""

from __future__ import annotations

import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from google.protobuf.descriptor_pool import DescriptorPool

from beacon_client import Client, errors
from beacon_client._pb import beacon_pb2, registry_pb2

SERVICES = {
    "beacon.v1.Cluster",
    "beacon.v1.registry.Registry",
    "beacon.v1.sequence.Sequences",
    "beacon.v1.assign.Assignments",
    "beacon.v1.tasks.Tasks",
}


def test_reflection_lists_and_describes_every_service(cluster):
    channel = grpc.insecure_channel(cluster.addrs[1])
    db = ProtoReflectionDescriptorDatabase(channel)
    listed = set(db.get_services())
    assert SERVICES <= listed, listed
    assert "grpc.health.v1.Health" in listed
    pool = DescriptorPool(db)
    registry = pool.FindServiceByName("beacon.v1.registry.Registry")
    methods = {m.name: m for m in registry.methods}
    assert methods["Watch"].output_type.full_name == "beacon.v1.registry.NodeEvent"
    assert methods["KeepAlive"].client_streaming and methods["KeepAlive"].server_streaming
    channel.close()


def health_becomes(health, service: str, want, timeout: float = 10.0):
    """Polls the health of `service` until it is `want` (the beacon tells each change of it)."""
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
        if status == want:
            return
        time.sleep(0.05)
    raise AssertionError(f"{service or 'the server'} stayed {status}, not {want}")


def test_health_says_serving_per_service_and_not_serving_without_a_majority(cluster):
    channel = grpc.insecure_channel(cluster.addrs[2])
    health = health_pb2_grpc.HealthStub(channel)
    for service in SERVICES | {""}:
        health_becomes(health, service, health_pb2.HealthCheckResponse.SERVING)
    cluster.kill(0)
    cluster.kill(1)
    health_becomes(health, "beacon.v1.registry.Registry", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_becomes(health, "", health_pb2.HealthCheckResponse.NOT_SERVING)
    # A beacon's own view stays answerable.
    cluster_view = health.Check(health_pb2.HealthCheckRequest(service="beacon.v1.Cluster"), timeout=5)
    assert cluster_view.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as e:
        health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    # A majority back: the beacon says so without being asked anything else.
    cluster.restart(1)
    for service in SERVICES | {""}:
        health_becomes(health, service, health_pb2.HealthCheckResponse.SERVING)
    channel.close()


def test_bad_calls_get_their_status_and_the_beacon_serves_on(cluster):
    channel = grpc.insecure_channel(cluster.addrs[0])
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/beacon.v1.Nope/Nothing")(b"", timeout=5)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/beacon.v1.registry.Registry/Nothing")(b"", timeout=5)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/beacon.v1.registry.Registry/Register")(b"\xff\xff\xff\xff", timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/beacon.v1.registry.Registry/Register")(b"\x0a" + b"\xff" * 10, timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    big = registry_pb2.RegisterRequest(node_type="LOGIC", addr="10.0.0.1:1", metadata="x" * (5 << 20))
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/beacon.v1.registry.Registry/Register")(big.SerializeToString(), timeout=5)
    # Over max_frame_bytes (4 MiB): refused before it is read whole, as FRAME_TOO_LARGE.
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value
    assert "max_frame_bytes" in e.value.details(), e.value.details()
    assert errors.from_rpc_error(e.value).reason == "FRAME_TOO_LARGE"
    # The client raises one class for every "too large", never Compacted.
    with Client(cluster.addrs) as client:
        with pytest.raises(errors.TooLarge) as too_large:
            client.register("LOGIC", "10.0.0.1:1", metadata="x" * (5 << 20))
        assert not isinstance(too_large.value, errors.Compacted)
        assert too_large.value.reason == "FRAME_TOO_LARGE", too_large.value
    nodes = registry_pb2.NodesRequest().SerializeToString()
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/beacon.v1.registry.Registry/Nodes")(
            nodes, timeout=5, metadata=[("beacon-consistency", "eventual")])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "beacon-consistency" in e.value.details()
    # A read index asked for a follower that is no address.
    read_index = channel.unary_unary(
        "/beacon.v1.Cluster/ReadIndex", response_deserializer=beacon_pb2.ReadIndexReply.FromString)
    with pytest.raises(grpc.RpcError) as e:
        read_index(beacon_pb2.ReadIndexRequest(asker="beacon-2", term=1).SerializeToString(),
                   timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "asker" in e.value.details() and "IP:PORT" in e.value.details(), e.value.details()
    # Asked plainly (or for a beacon that is no follower: a round, as for any read), it answers.
    for asker in ("", "127.0.0.9:1"):
        reply = read_index(beacon_pb2.ReadIndexRequest(asker=asker, term=1).SerializeToString(),
                           timeout=5)
        assert reply.index >= 1 and reply.leader, reply
    # And a good call on the same connection still works.
    reply = channel.unary_unary(
        "/beacon.v1.registry.Registry/Register",
        response_deserializer=registry_pb2.RegisterReply.FromString,
    )(registry_pb2.RegisterRequest(node_type="LOGIC", addr="10.0.0.2:1").SerializeToString(), timeout=5)
    assert reply.node.node_id >= 1
    channel.close()


def test_reads_are_linearizable_unless_serializable_is_asked(cluster):
    with cluster.client() as c:
        reg = c.register("LOGIC", "10.9.0.1:80")
        more = [c.register("LOGIC", f"10.9.0.{i}:80") for i in (2, 3)]
        # A list read in pages of one holds what the whole list holds, each entry once.
        whole = [e.node_id for e in c.nodes("LOGIC")]
        assert len(whole) >= 3 and [e.node_id for e in c.nodes("LOGIC", page=1)] == whole
        for m in more:
            m.close()
        # Every beacon's linearizable answer holds the acknowledged registration at once.
        for addr in cluster.addrs:
            with Client([addr], retry_for=0) as one:
                assert "10.9.0.1:80" in [e.addr for e in one.nodes("LOGIC")], addr
    # Stop renewing (the lease, 2 s, outlives the next step) before the beacons go.
    reg.close(release=False)
    leader = cluster.leader()
    alone = next(i for i in range(3) if i != leader)
    for i in range(3):
        if i != alone:
            cluster.kill(i)
    # Without a majority a linearizable read is refused, never answered from an old replica...
    with Client([cluster.addrs[alone]], retry_for=0, timeout=10) as one:
        with pytest.raises(errors.BeaconError) as e:
            one.nodes("LOGIC")
        assert e.value.reason in ("NO_QUORUM", "NOT_LEADER", "UNAVAILABLE"), e.value
        assert "serializable" in str(e.value)
    # ...while a serializable read answers from that replica as it is, marked stale.
    with Client([cluster.addrs[alone]], retry_for=0, consistency="serializable") as one:
        deadline = time.monotonic() + 5
        while True:
            reply = one.call("registry", "Nodes", registry_pb2.NodesRequest(node_type="LOGIC"))
            if reply.stale or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert reply.stale, reply
        assert "10.9.0.1:80" in [e.node.addr for e in reply.nodes]
    with pytest.raises(ValueError):
        Client(cluster.addrs, consistency="eventual")


def test_a_client_pointed_at_the_admin_port_or_a_closed_one_is_told_what_is_wrong(tmp_path):
    from conftest import Cluster, free_ports
    admin, closed = free_ports(2)
    c = Cluster(tmp_path, 1, {"admin": f"127.0.0.1:{admin}"})
    try:
        # The admin port speaks HTTP: a gRPC call there is told where the client port is.
        with Client([f"127.0.0.1:{admin}"], retry_for=5) as client:
            with pytest.raises(errors.FailedPrecondition) as e:
                client.nodes()
        assert "admin HTTP API" in e.value.message and c.addrs[0] in e.value.message, e.value
        # Nothing listens: refused at once for every beacon of the list, not retried.
        with Client([f"127.0.0.1:{closed}"], retry_for=30) as client:
            with pytest.raises(errors.Unavailable) as e:
                client.nodes()
        assert "connection refused" in e.value.message, e.value
        # One beacon of the list listening is enough.
        with Client([f"127.0.0.1:{closed}", c.addrs[0]], retry_for=5) as client:
            assert client.nodes() == []
    finally:
        c.close()


def test_a_client_over_its_rate_is_told_busy_and_backs_off_until_it_gets_through(tmp_path):
    from conftest import Cluster
    c = Cluster(tmp_path, 1, {"limits": {"client_rate": 30}, "lease_ms": 60000})
    try:
        # A raw call over the rate: refused BUSY (RESOURCE_EXHAUSTED) with when to retry.
        channel = grpc.insecure_channel(c.addrs[0])
        register = channel.unary_unary("/beacon.v1.registry.Registry/Register",
                                       response_deserializer=registry_pb2.RegisterReply.FromString)
        refused = None
        for i in range(100):
            try:
                register(registry_pb2.RegisterRequest(
                    node_type="RAW", addr=f"10.5.0.{i}:1").SerializeToString(), timeout=5)
            except grpc.RpcError as e:
                refused = errors.from_rpc_error(e)
                break
        channel.close()
        assert isinstance(refused, errors.Busy), refused
        assert refused.status == grpc.StatusCode.RESOURCE_EXHAUSTED and refused.reason == "BUSY"
        assert 5 <= refused.retry_after_ms <= 1000, refused.retry_after_ms
        # The client waits as told, with jitter, and gets every call through.
        with Client(c.addrs, retry_for=30) as client:
            regs = [client.register("LOGIC", f"10.6.0.{i}:1") for i in range(60)]
            assert len({r.node_id for r in regs}) == 60
            for r in regs:
                r.close()
    finally:
        c.close()


def test_a_watch_of_a_set_larger_than_a_page_lists_it_whole(tmp_path):
    from conftest import Cluster
    from beacon_client._pb import registry_pb2 as r
    c = Cluster(tmp_path, 1, {"lease_ms": 600000, "id_range": [1, 10000]})
    try:
        with Client(c.addrs) as client:
            pad = '{"pad": "' + "x" * 880 + '"}'
            for i in range(1500):  # 1.35 MB of metadata: three pages of about 512 KiB
                client.call("registry", "Register", r.RegisterRequest(
                    node_type="LOGIC", addr=f"10.7.{i // 256}.{i % 256}:1", metadata=pad))
            watch = client.watch(["LOGIC"])
            present = [watch.next(timeout=20) for _ in range(1500)]
            assert {k for k, _ in present} == {"present"}
            assert len({n.node_id for _, n in present}) == 1500
            client.call("registry", "Register", r.RegisterRequest(
                node_type="LOGIC", addr="10.8.0.1:1"))
            kind, node = watch.next(timeout=10)
            assert (kind, node.addr) == ("added", "10.8.0.1:1")
            watch.close()
    finally:
        c.close()
