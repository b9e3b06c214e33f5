"""The recipe in Python, ``python/examples/stream_consumer.py``, as a fleet of
processes against a real redis-server: every tenant's output is exactly its stream's
entry ids, in order (no duplicate, none missing), through a SIGKILL of one consumer,
a deposed owner's write injected with its old fence after the new owner raised
(refused), a join and a graceful leave (SIGTERM, handing the cursors over). And one
group, two languages, one recipe: the Rust example ``examples/stream_consumer.rs``
and the Python one share the group and its keys through a kill of each.

Each test starts a redis-server of its own: the example's group and keys are fixed
(``stream-consumers``, ``stream:{tenant-01}``, ...)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from leasehold import FenceRejected, FencedWriter, GroupAdmin, GroupStatus

from conftest import RedisServer, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(HERE), "examples", "stream_consumer.py")
GROUP = "stream-consumers"
TENANTS = 8
# A short lease keeps the run short: a killed owner's tenants move after it.
LEASE_MS = 1000
# Entries per second for a tenant of weight 1 (2x and 3x for the others).
RATE = "5"
# Any wait for the fleet to reach a state (a start, a move, progress): generous for a
# busy 2-core machine.
LIMIT = 60.0
# Entries of every tenant processed after each change before the next one.
PROGRESS = 5
# From a signal to the exit.
EXIT = 30.0


def tenants() -> list[str]:
    return [f"tenant-{i:02}" for i in range(1, TENANTS + 1)]


def entry_id(entry: str) -> tuple[int, int]:
    """A stream entry id (``<ms>-<seq>``) as numbers, ordered as Redis orders them."""
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)


class Process:
    """A child process whose output lines are collected as they come."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name = name
        self.command = command
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self._lines.append(line.rstrip("\n"))

    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    def output(self) -> str:
        return f"--- {self.name} ---\n" + "\n".join(self.lines())

    def wait_for_line(self, needle: str, timeout: float = LIMIT) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines():
                if needle in line:
                    return line
            if self.process.poll() is not None:
                time.sleep(0.2)  # the last lines
                if any(needle in line for line in self.lines()):
                    continue  # found on the next pass
                pytest.fail(f"{self.name} exited ({self.process.returncode}) before "
                            f"printing {needle!r}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name} did not print {needle!r}:\n{self.output()}")
            time.sleep(0.05)

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def wait_exit(self, timeout: float = EXIT) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} did not exit within {timeout}s:\n{self.output()}")

    def stop(self) -> list[str]:
        """SIGTERM: the example leaves gracefully and exits 0."""
        self.signal(signal.SIGTERM)
        code = self.wait_exit()
        lines = self.lines()
        assert code == 0, f"{self.name}: exit {code} after SIGTERM:\n{self.output()}"
        return lines

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class Consumer(Process):
    """A consumer replica, in Python or in Rust, with its HTTP port."""

    def __init__(self, name: str, program: list[str], url: str) -> None:
        self.port = free_port()
        command = [
            *program, "consume", "--redis-url", url, "--replica", name,
            "--port", str(self.port), "--lease-ms", str(LEASE_MS), "--tenants", str(TENANTS),
        ]
        super().__init__(name, command)
        self.wait_for_line(f"{name}: consuming group")

    def resumes(self, tenant: str) -> int:
        """How many terms of ``tenant`` this consumer has started."""
        needle = f": {tenant}: fence "
        return sum(1 for line in self.lines() if needle in line)


def python_example() -> list[str]:
    return [sys.executable, EXAMPLE]


class Probe:
    """The test's own view of Redis: the group, the streams, the outputs, the cursors."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.loop = asyncio.new_event_loop()
        self.admin = GroupAdmin(url, GROUP)
        self.writer = FencedWriter(url)

    def close(self) -> None:
        self.client.close()
        self.loop.close()

    def status(self) -> GroupStatus:
        status = self.loop.run_until_complete(self.admin.status())
        assert status is not None, "the group exists"
        return status

    def owners(self) -> dict[str, tuple[str, int]]:
        """Tenant → (owner, fence), for the owned ones."""
        return {
            p.partition: (p.owner, p.fence)
            for p in self.status().partitions
            if p.owner
        }

    def held_by(self, replica: str) -> dict[str, int]:
        return {t: f for t, (o, f) in self.owners().items() if o == replica}

    def busiest(self, among: list[str]) -> str:
        owners = self.owners()
        return max(among, key=lambda r: sum(1 for o, _ in owners.values() if o == r))

    def all_owned_by(self, fleet: dict[str, Consumer]) -> bool:
        owners = self.owners()
        return len(owners) == TENANTS and all(o in fleet for o, _ in owners.values())

    def stream_ids(self, tenant: str) -> list[str]:
        return [entry for entry, _ in self.client.xrange(f"stream:{{{tenant}}}")]

    def output(self, tenant: str) -> list[str]:
        return self.client.lrange(f"out:{{{tenant}}}", 0, -1)

    def cursor(self, tenant: str) -> str | None:
        return self.client.get(f"cursor:{{{tenant}}}")

    def entry_after(self, tenant: str, cursor: str) -> str | None:
        after = self.client.xrange(f"stream:{{{tenant}}}", f"({cursor}", "+", count=1)
        return after[0][0] if after else None

    def step(self, tenant: str, entry: str, fence: int) -> None:
        """One step as the example commits it: the output of ``entry`` and the cursor
        moved to it, in one batch fenced with ``fence``."""
        batch = (
            self.writer.batch()
            .rpush(f"out:{{{tenant}}}", entry)
            .set(f"cursor:{{{tenant}}}", entry)
        )
        self.loop.run_until_complete(batch.commit(fence))

    def wait_for(self, what: str, done: Callable[[], bool], timeout: float = LIMIT) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                pytest.fail(f"not {what} within {timeout}s: {self.owners()}")
            time.sleep(0.1)

    def wait_progress(self, after: str) -> None:
        """Waits until the current owners have processed ``PROGRESS`` more entries of
        every tenant than its stream holds now: they resumed where the previous ones
        stopped, and go on."""
        deadline = time.monotonic() + LIMIT
        targets = [(t, len(self.stream_ids(t)) + PROGRESS) for t in tenants()]
        for tenant, target in targets:
            while True:
                ids = self.stream_ids(tenant)
                cursor = self.cursor(tenant)
                if (
                    len(ids) >= target
                    and cursor is not None
                    and entry_id(cursor) >= entry_id(ids[target - 1])
                ):
                    break
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"{tenant}: no progress after {after}: cursor {cursor}, "
                        f"{len(ids)} entries, waiting for {target}"
                    )
                time.sleep(0.05)

    def wait_drained(self) -> None:
        deadline = time.monotonic() + LIMIT
        for tenant in tenants():
            while True:
                ids = self.stream_ids(tenant)
                assert ids, f"{tenant}: the producer appended nothing"
                if self.cursor(tenant) == ids[-1]:
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"{tenant}: not drained: cursor {self.cursor(tenant)}, "
                                f"last entry {ids[-1]}")
                time.sleep(0.1)

    def assert_exactly_once(self) -> None:
        """Every tenant's output is its stream's ids, in order, once each."""
        for tenant in tenants():
            ids, output = self.stream_ids(tenant), self.output(tenant)
            duplicates = len(output) - len(set(output))
            missing = sorted(set(ids) - set(output), key=entry_id)
            assert duplicates == 0, f"{tenant}: {duplicates} entries output twice"
            assert missing == [], f"{tenant}: {len(missing)} entries never output: {missing[:5]}"
            assert output == ids, f"{tenant}: output out of order"


@pytest.fixture
def server() -> Iterator[RedisServer]:
    """A redis-server of the test's own: the example's group and keys are fixed."""
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    """Every process a test starts, killed at its end whatever happened."""
    started: list[Process] = []
    try:
        yield started
    finally:
        for process in started:
            process.kill()


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_python_recipe_outputs_every_entry_exactly_once(server, processes):
    url = server.url
    probe = Probe(url)
    producer = Process(
        "producer",
        [*python_example(), "produce", "--redis-url", url, "--rate", RATE,
         "--tenants", str(TENANTS)],
    )
    processes.append(producer)
    producer.wait_for_line(f"producer: appending to {TENANTS} streams")

    # Three consumers share the eight tenants.
    fleet: dict[str, Consumer] = {}
    for name in ["a", "b", "c"]:
        fleet[name] = Consumer(name, python_example(), url)
        processes.append(fleet[name])
    probe.wait_for(
        "owned by a, b and c, each holding some",
        lambda: probe.all_owned_by(fleet) and all(probe.held_by(r) for r in fleet),
    )
    probe.wait_progress("the start")

    # The HTTP side: alive, ready once it holds its share, its owned tenants.
    port = fleet["a"].port
    for path in ["/livez", "/healthz"]:
        assert http_get(port, path) == (200, "ok\n"), path
    deadline = time.monotonic() + LIMIT
    while (reply := http_get(port, "/readyz"))[0] != 200:
        assert reply[0] == 503, reply
        assert time.monotonic() < deadline, f"/readyz still says {reply}"
        time.sleep(0.2)
    assert reply == (200, "ready\n")
    deadline = time.monotonic() + LIMIT
    while True:
        code, body = http_get(port, "/owned")
        assert code == 200, body
        listed = set(json.loads(body))
        if listed and listed == set(probe.held_by("a")):
            break
        assert time.monotonic() < deadline, f"/owned says {listed}, the group {probe.held_by('a')}"
        time.sleep(0.2)
    code, body = http_get(port, "/metrics")
    assert code == 200 and "stream_consumer_entries_total{" in body, body
    assert http_get(port, "/nope")[0] == 404

    # A kill (SIGKILL: nothing released, nothing handed off): the busiest consumer's
    # tenants move once its lease expires, to new terms that read the committed cursors.
    victim = probe.busiest(list(fleet))
    held = probe.held_by(victim)
    tenant, old = next(iter(held.items()))
    killed = fleet.pop(victim)
    before = {r: c.resumes(tenant) for r, c in fleet.items()}
    killed.signal(signal.SIGKILL)
    killed.wait_exit()

    # The killed consumer's write in flight, as if it still ran (a pause, a slow link):
    # it goes on with one of its tenants under its old fence while the group moves the
    # tenant. What it gets in before the new owner's raise is committed like any step;
    # from the raise on, it is refused.
    cursor = probe.cursor(tenant) or "0-0"
    refused = False
    deadline = time.monotonic() + LIMIT
    while True:
        started = [r for r, c in fleet.items() if c.resumes(tenant) > before[r]]
        if started:
            new_owner = started[0]
            break
        assert time.monotonic() < deadline, f"{tenant}: no new term"
        entry = None if refused else probe.entry_after(tenant, cursor)
        if entry is None:
            time.sleep(0.005)
            continue
        try:
            probe.step(tenant, entry, old)
            cursor = entry
        except FenceRejected:
            refused = True
    # The new owner has raised and read the cursor (it prints that before its first
    # write): stopped there, it sees the deposed owner's next step land, in flight
    # until now. Refused: without the raise it would land, and the new owner would
    # output that entry again.
    fleet[new_owner].signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + LIMIT
        while (entry := probe.entry_after(tenant, cursor)) is None:
            assert time.monotonic() < deadline, f"{tenant}: no entry after {cursor}"
            time.sleep(0.005)
        with pytest.raises(FenceRejected, match=f"stale fence {old}"):
            probe.step(tenant, entry, old)
    finally:
        fleet[new_owner].signal(signal.SIGCONT)
    probe.wait_for(
        "the killed consumer's tenants owned again in new terms",
        lambda: probe.all_owned_by(fleet)
        and all(probe.owners()[t][1] > f for t, f in held.items()),
    )
    probe.wait_progress("the kill")

    # A join: d takes its share, handed over with the cursors.
    fleet["d"] = Consumer("d", python_example(), url)
    processes.append(fleet["d"])
    probe.wait_for("d's share taken", lambda: probe.all_owned_by(fleet) and bool(probe.held_by("d")))
    probe.wait_progress("the join")

    # A graceful leave (SIGTERM): the busiest hands each cursor to the next owner,
    # which resumes from it.
    leaver = probe.busiest(list(fleet))
    left_lines = fleet.pop(leaver).stop()
    assert any("SIGTERM: leaving" in line for line in left_lines), left_lines
    probe.wait_for("the leaver's tenants owned by the others", lambda: probe.all_owned_by(fleet))
    handed: list[tuple[str, str]] = []
    for line in left_lines:
        rest = line.removeprefix(f"{leaver}: ")
        if "(leave" in rest and ": handed off at " in rest:
            handed_tenant, _, after = rest.partition(": handed off at ")
            handed.append((handed_tenant, after.split()[0]))
    assert handed, f"{leaver} handed nothing off:\n" + "\n".join(left_lines)
    delivered = 0
    for handed_tenant, handed_cursor in handed:
        needle = f": {handed_tenant}: fence "
        at = f": resuming after {handed_cursor} ("
        deadline = time.monotonic() + LIMIT
        while True:
            found = [
                line for c in fleet.values() for line in c.lines() if needle in line and at in line
            ]
            if found:
                break
            assert time.monotonic() < deadline, (
                f"{handed_tenant}: nobody resumed from the cursor {leaver} handed off "
                f"({handed_cursor})"
            )
            time.sleep(0.1)
        delivered += any(line.endswith("(handed over)") for line in found)
    assert delivered > 0, f"no cursor arrived with its hand-off: {handed}"
    probe.wait_progress("the leave")

    # The producer stops; the consumers drain every stream; then they leave.
    producer_lines = producer.stop()
    assert any("appended" in line for line in producer_lines), producer_lines
    probe.wait_drained()
    for consumer in fleet.values():
        consumer.stop()
    probe.assert_exactly_once()
    probe.close()


def test_rust_and_python_consumers_share_one_group_exactly_once(
    server, processes, rust_stream_consumer
):
    url = server.url
    rust = [rust_stream_consumer]
    probe = Probe(url)
    # The Rust example's producer: the same streams either language reads.
    producer = Process(
        "producer",
        [*rust, "produce", "--redis-url", url, "--rate", RATE, "--tenants", str(TENANTS)],
    )
    processes.append(producer)
    producer.wait_for_line(f"producer: appending to {TENANTS} streams")

    fleet: dict[str, Consumer] = {}
    for name, program in [("rust-1", rust), ("py-1", python_example()), ("py-2", python_example())]:
        fleet[name] = Consumer(name, program, url)
        processes.append(fleet[name])
    probe.wait_for(
        "owned by rust-1, py-1 and py-2, each holding some",
        lambda: probe.all_owned_by(fleet) and all(probe.held_by(r) for r in fleet),
    )
    probe.wait_progress("the start")

    def kill(victim: str) -> None:
        probe.wait_for(f"{victim} holding a tenant", lambda: bool(probe.held_by(victim)))
        held = probe.held_by(victim)
        killed = fleet.pop(victim)
        killed.signal(signal.SIGKILL)
        killed.wait_exit()
        probe.wait_for(
            f"{victim}'s tenants owned again in new terms",
            lambda: probe.all_owned_by(fleet)
            and all(probe.owners()[t][1] > f for t, f in held.items()),
        )
        probe.wait_progress(f"the kill of {victim}")

    # The Rust consumer dies: Python ones take its tenants from its committed cursors.
    kill("rust-1")
    # Another Rust consumer joins; then a Python one dies: Rust and Python take over.
    fleet["rust-2"] = Consumer("rust-2", rust, url)
    processes.append(fleet["rust-2"])
    probe.wait_for(
        "rust-2's share taken", lambda: probe.all_owned_by(fleet) and bool(probe.held_by("rust-2"))
    )
    probe.wait_progress("the join of rust-2")
    kill("py-1")

    producer.stop()
    probe.wait_drained()
    # Every consumer served terms: the Python ones took rust-1's tenants from its
    # committed cursors, rust-2 took its share from Python hand-overs.
    for consumer in fleet.values():
        assert any(": resuming after " in line for line in consumer.lines()), consumer.output()
    for consumer in fleet.values():
        consumer.stop()
    probe.assert_exactly_once()
    probe.close()


def test_the_example_is_typed_for_mypy_strict():
    """The example and the package's stubs check under ``mypy --strict`` (skipped where
    mypy is not installed)."""
    pytest.importorskip("mypy")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", EXAMPLE],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr

