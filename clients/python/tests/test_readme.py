"""This package's README runs: its ```python blocks, in order, are one service, run here as a
script against real beacons (a lone one, and three with the first listed stopped)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def readme_script() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.S | re.M)
    assert blocks, "the README has no python block"
    return "\n".join(blocks)


def run_readme(beacons: list[str], tmp_path) -> str:
    script = tmp_path / "readme.py"
    script.write_text(readme_script())
    env = dict(os.environ, BEACON_ENDPOINTS=",".join(beacons), PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=90)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for said in ("node id", "present", "order", "snowflake", "thumbnail of photo-42.jpg",
                 "log_level"):
        assert said in out, f"the README never said {said!r}:\n{out}"
    return out


def test_the_readme_runs_against_a_lone_beacon_and_again(lone, tmp_path):
    first = run_readme(lone.addrs, tmp_path)
    second = run_readme(lone.addrs, tmp_path)
    assert first != second, "the second run got IDs and numbers of its own"


def test_the_readme_runs_past_a_stopped_first_beacon(cluster, tmp_path):
    leader = cluster.leader()
    stopped = (leader + 1) % 3
    cluster.stop(stopped)
    try:
        first = [cluster.addrs[stopped]] + [a for i, a in enumerate(cluster.addrs) if i != stopped]
        run_readme(first, tmp_path)
    finally:
        cluster.cont(stopped)
