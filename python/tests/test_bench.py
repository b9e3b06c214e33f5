"""``python -m leasehold.bench``: both modes, short, each on its own throwaway Redis.

Needs ``redis-server`` on PATH (Debian's redis-server package) and the ``redis``
package; skipped without them.
"""

from __future__ import annotations

import json
import numbers
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("redis")
pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None,
    reason="redis-server not found: install Debian's redis-server package",
)


def run_bench(*args: str, timeout: float) -> dict:
    """Runs the bench (its default: a throwaway redis-server); returns its one JSON
    line, after checking that stdout holds exactly that."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    done = subprocess.run(
        [sys.executable, "-m", "leasehold.bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert done.returncode == 0, f"exit {done.returncode}\nstderr:\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be one JSON line, got {len(lines)}:\n{done.stdout}"
    report = json.loads(lines[0])
    assert isinstance(report, dict)
    return report


def is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def test_side_by_side_one_run_each() -> None:
    report = run_bench(
        "side-by-side", "--lease-ms", "300", "--runs", "1", "--blocked-runs", "1",
        timeout=120,
    )
    assert report["lease_ms"] == 300
    for impl in ("leasehold", "guide"):
        side = report[impl]
        for key in ("overshoot_ms", "handover_ms"):
            stats = side[key]
            assert set(stats) >= {"min", "median", "max"}, (impl, key, stats)
            assert all(is_number(stats[k]) for k in ("min", "median", "max")), (impl, key, stats)
            assert stats["min"] <= stats["median"] <= stats["max"]
        blocked = side["blocked_loop"]
        assert isinstance(blocked["lease_kept"], bool), blocked
        assert isinstance(blocked["overlaps"], int) and not isinstance(blocked["overlaps"], bool)
    # Renewal off the event loop: a duty blocking its loop for three leases keeps
    # the lease, and the follower never leads meanwhile.
    assert report["leasehold"]["blocked_loop"]["lease_kept"] is True, report["leasehold"]
    assert report["leasehold"]["blocked_loop"]["overlaps"] == 0, report["leasehold"]


def test_partitions_tiny() -> None:
    report = run_bench(
        "partitions", "--partitions", "40", "--replicas", "2", "--lease-ms", "1000",
        "--seconds", "2",
        timeout=120,
    )
    for impl in ("leasehold", "guide"):
        side = report[impl]
        for key in ("redis_cpu_percent", "commands_per_second"):
            assert is_number(side[key]), (impl, key, side)
        spread = side["spread"]
        assert set(spread) >= {"min", "max", "counts"}
        assert len(spread["counts"]) == 2
        assert spread["min"] == min(spread["counts"]) and spread["max"] == max(spread["counts"])
        assert isinstance(side["owned"], int)
        assert side["time_to_all_owned_ms"] is None or is_number(side["time_to_all_owned_ms"])
    assert report["leasehold"]["owned"] == 40, report["leasehold"]
    assert report["leasehold"]["time_to_all_owned_ms"] is not None
