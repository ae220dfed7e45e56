"""A service on beacon in a few lines: a node ID with a lease kept alive, its peers, unique
numbers, a task. Run it against the quick start's cluster:

    python clients/python/examples/quickstart.py 127.0.0.1:16000,127.0.0.1:17000,127.0.0.1:18000
"""

import sys
import time

from beacon_client import Client, NotFound

beacons = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:16000"
client = Client(beacons)

# A node ID, renewed in the background; on_lost fires if the lease is lost.
reg = client.register("LOGIC", "10.0.0.5:8080", metadata={"zone": "b"},
                      on_lost=lambda why: print("lease lost:", why))
print(f"node id {reg.node_id}, fencing token {reg.fencing_token}")

# Who else is there: the current LOGIC services, then changes as they happen.
watch = client.watch(["LOGIC"])
kind, node = watch.next(timeout=5)
print(kind, node.node_id, node.addr)
watch.close()

# Unique numbers from a named sequence, from a double buffer of segments.
try:
    client.create_sequence("orders", step=1000)
except Exception:
    pass  # it exists
orders = client.sequence("orders")
print("order numbers", [orders.next() for _ in range(3)])
orders.close()

# A task queue with one worker.
client.create_queue("mail")
worker = client.worker(reg, ["mail"], lambda task: b"sent to " + task.payload)
name = f"welcome-{reg.node_id}-{time.time_ns()}"
client.submit("mail", name, b"ada@example.com")
task = client.wait("mail", name, timeout=10)
print("task", task.name, task.state, task.result.decode())
worker.stop()

try:
    client.sequence("no-such-sequence")
except NotFound as e:
    print("refused:", e.reason, e.beacon_code)

reg.close()
