"""Checks beside the service: each kind against a real server on loopback, the hysteresis
that keeps one bad round from reporting, and a registration whose checks fail leaving
discovery and coming back."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

import beacon_client as bc
from beacon_client.checks import Hysteresis, worst
from conftest import free_ports


class Answering(http.server.BaseHTTPRequestHandler):
    code = 200

    def do_GET(self):
        self.send_response(type(self).code)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_ports(1)[0]), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_each_kind_of_check_against_a_real_server(http_server):
    port = http_server.server_address[1]
    url = f"http://127.0.0.1:{port}/health"
    assert bc.HttpCheck(url).run() == ("passing", "")
    Answering.code = 429
    assert bc.HttpCheck(url).run()[0] == "warning"
    Answering.code = 503
    status, note = bc.HttpCheck(url).run()
    assert status == "critical" and "503" in note
    Answering.code = 200
    assert bc.TcpCheck(f"127.0.0.1:{port}").run() == ("passing", "")
    closed = free_ports(1)[0]
    status, note = bc.TcpCheck(f"127.0.0.1:{closed}", timeout=0.5).run()
    assert status == "critical" and f"tcp 127.0.0.1:{closed}" in note
    status, _ = bc.HttpCheck(f"http://127.0.0.1:{closed}/", timeout=0.5).run()
    assert status == "critical"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    gport = free_ports(1)[0]
    server.add_insecure_port(f"127.0.0.1:{gport}")
    server.start()
    try:
        servicer.set("db", health_pb2.HealthCheckResponse.SERVING)
        assert bc.GrpcCheck(f"127.0.0.1:{gport}", "db").run() == ("passing", "")
        servicer.set("db", health_pb2.HealthCheckResponse.NOT_SERVING)
        status, note = bc.GrpcCheck(f"127.0.0.1:{gport}", "db").run()
        assert status == "critical" and "NOT_SERVING" in note
        status, note = bc.GrpcCheck(f"127.0.0.1:{gport}", "other").run()
        assert status == "critical" and "NOT_FOUND" in note
    finally:
        server.stop(0)

    assert bc.CallbackCheck(lambda: "warning").run() == ("warning", "")
    assert bc.CallbackCheck(lambda: ("critical", "queue full")).run() == (
        "critical", "queue full")
    status, note = bc.CallbackCheck(lambda: 1 / 0, name="math").run()
    assert status == "critical" and note.startswith("math: division")
    assert bc.CallbackCheck(lambda: "sick").run()[0] == "critical"


def test_a_status_is_reported_only_once_it_held_for_the_threshold():
    h = Hysteresis(3)
    rounds = ["critical", "passing", "critical", "critical", "critical", "critical"]
    assert [h.observe(s) for s in rounds] == [False, False, False, False, True, False]
    assert h.published == "critical"
    assert worst([("passing", ""), ("warning", "slow"), ("critical", "down"),
                  ("critical", "gone")]) == ("critical", "down; gone")
    with pytest.raises(ValueError):
        Hysteresis(0)


def test_a_service_whose_checks_fail_leaves_discovery_and_comes_back(cluster):
    client = cluster.client()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    port = free_ports(1)[0]
    listener.bind(("127.0.0.1", port))
    listener.listen()
    reg = client.register("CHECKED", "10.0.8.1:9000")
    failing = threading.Event()
    checker = reg.run_checks(
        [bc.TcpCheck(f"127.0.0.1:{port}", timeout=0.5),
         bc.CallbackCheck(lambda: ("critical", "told to") if failing.is_set() else "passing")],
        interval=0.1, threshold=3)
    watch = client.watch(["CHECKED"])
    kind, node = watch.next(timeout=10)
    assert kind == "present" and node.status == "passing"
    listener.close()
    kind, node = watch.next(timeout=10)
    assert (kind, node.node_id, node.status) == ("removed", reg.node_id, "critical")
    assert f"tcp 127.0.0.1:{port}" in node.health.note
    assert checker.rounds >= 3, "reported only after three rounds"
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    kind, node = watch.next(timeout=10)
    assert (kind, node.status) == ("added", "passing")
    failing.set()
    kind, node = watch.next(timeout=10)
    assert (kind, node.health.note) == ("removed", "told to")
    watch.close()
    reg.close()
    listener.close()


def test_a_long_note_is_cut_to_what_a_beacon_takes_and_the_lease_holds(cluster):
    client = cluster.client()
    reg = client.register("NOTED", "10.0.8.2:9000")
    reg.set_health("warning", "é" * 600)

    def published():
        [node] = client.nodes("NOTED")
        return node if node.status == "warning" else None

    deadline = time.monotonic() + 10
    while (node := published()) is None:
        assert time.monotonic() < deadline, "the warning is published"
        time.sleep(0.05)
    assert node.health.note == "é" * 128, "cut at 256 bytes, on a character's edge"
    assert reg.holds()
    reg.close()
