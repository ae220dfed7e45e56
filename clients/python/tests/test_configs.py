"""A Python service's configuration from three real beacons: its effective config at
registration, each change after, across a leader kill, and compare-and-set."""

from __future__ import annotations

import queue
import time

import grpc
import pytest

import beacon_client as bc


def test_a_service_gets_its_config_then_each_change_across_a_leader_kill(cluster):
    client = cluster.client()
    client.config_put("cluster/log_level", "info")
    client.config_put("type/LOGIC/port", "7000")
    client.config_put("type/GATE/port", "9000")
    client.config_put("file/game", "[game]", path="conf/game.ini")
    reg = client.register("LOGIC", "10.0.2.1:8080")
    config = reg.config()
    # Listed at once: what was written before the service started is not lost.
    kinds = sorted(config.next(timeout=10)[1].key for _ in range(3))
    assert kinds == ["cluster/log_level", "file/game", "type/LOGIC/port"], kinds
    assert config.effective() == {"log_level": b"info", "port": b"7000"}
    assert config.files() == {"game": ("conf/game.ini", b"[game]")}

    revision = client.config_put("node/10.0.2.1:8080/port", "7100")
    kind, doc = config.next(timeout=10)
    assert (kind, doc.key, doc.revision) == ("put", "node/10.0.2.1:8080/port", revision)
    assert config.effective()["port"] == b"7100"
    # By node ID: this registration's own, over its address's.
    client.config_put(f"id/{reg.node_id}/port", "7200")
    client.config_put(f"id/{reg.node_id + 1}/port", "7300")  # another registration's
    kind, doc = config.next(timeout=10)
    assert (kind, doc.key) == ("put", f"id/{reg.node_id}/port")
    assert config.effective()["port"] == b"7200"
    client.config_delete(f"id/{reg.node_id}/port")
    assert config.next(timeout=10)[0] == "deleted"

    time.sleep(0.5)
    cluster.kill(cluster.leader())
    client.config_put("type/GATE/port", "9100")  # not this service's: not told
    client.config_put("cluster/log_level", "debug")
    removed = client.config_delete("node/10.0.2.1:8080/port")
    seen = [config.next(timeout=15) for _ in range(2)]
    assert [(k, d.key) for k, d in seen] == [
        ("put", "cluster/log_level"), ("deleted", "node/10.0.2.1:8080/port")], seen
    assert seen[1][1].revision == removed
    assert config.effective() == {"log_level": b"debug", "port": b"7000"}
    assert config.resumes >= 1 and config.resyncs == 0, (config.resumes, config.resyncs)
    with pytest.raises(queue.Empty):
        config.next(timeout=0.5)
    config.close()
    reg.close()


def test_compare_and_set_and_bad_input_are_typed(cluster):
    client = cluster.client()
    first = client.config_put("cluster/counter", "0", if_rev=0)
    with pytest.raises(bc.FailedPrecondition) as e:
        client.config_put("cluster/counter", "1", if_rev=0)
    assert "nothing was written" in str(e.value)
    second = client.config_put("cluster/counter", "1", if_rev=first)
    assert second > first
    [doc] = client.config_get("cluster/counter")
    assert (doc.value, doc.revision) == (b"1", second)
    with pytest.raises(bc.NotFound):
        client.config_get("cluster/nothing")
    with pytest.raises(bc.InvalidArgument) as e:
        client.config_put("nowhere/x", "1")
    assert "not a config key" in str(e.value)
    with pytest.raises(bc.InvalidArgument):
        client.config_put("cluster/limits", "{nope", json=True)
    # A watch of a prefix no key can have is refused as the write is: at once by the
    # client, and by the beacons for any other client.
    with pytest.raises(bc.InvalidArgument) as e:
        client.config_watch(["demo/"])
    assert "no key starts with it" in str(e.value)
    from beacon_client._pb import configs_pb2
    stub = client.stub("configs")
    with pytest.raises(grpc.RpcError) as e:
        next(iter(stub.Watch(configs_pb2.WatchRequest(prefixes=["demo/"]), timeout=5)))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "no key starts with this prefix" in e.value.details()
    watched = client.config_watch(["cluster/"])
    kind, doc = watched.next(timeout=10)
    assert (kind, doc.key, doc.value) == ("present", "cluster/counter", b"1")
    client.config_put("type/LOGIC/x", "1")  # not under the prefix
    third = client.config_put("cluster/counter", "2", if_rev=second)
    kind, doc = watched.next(timeout=10)
    assert (kind, doc.revision, doc.value) == ("put", third, b"2")
    watched.close()
