"""One group, two languages: a Rust replica process and two Python replica processes
share a group's partitions over the same scripts and keys. Checked from the
processes' own lines (on the wall clock they share) and from the fenced ledgers:
one owner per partition at any instant, fences in order, and a SIGKILLed Python
replica's partitions owned again within one lease and a renew interval."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest
import redis

LEASE_MS = 1000
RENEW_MS = LEASE_MS / 3
PARTITIONS = 24
# A busy 2-core CI machine: the bound the library promises plus generous slack.
SLACK_MS = 1500
HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Replica:
    name: str
    process: subprocess.Popen
    lines: list[dict] = field(default_factory=list)
    killed_at_us: int | None = None

    def read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                # The Rust replica names its replica only with several per process.
                line.setdefault("replica", self.name)
                self.lines.append(line)


@dataclass
class Term:
    holder: str
    fence: int
    start_us: int
    end_us: int | None


def terms_of(replicas: list[Replica]) -> dict[str, list[Term]]:
    terms: dict[str, list[Term]] = {}
    for replica in replicas:
        open_terms: dict[tuple[str, int], Term] = {}
        for line in list(replica.lines):
            if line.get("event") == "owned":
                term = Term(replica.name, line["fence"], line["at_us"], None)
                open_terms[(line["partition"], line["fence"])] = term
                terms.setdefault(line["partition"], []).append(term)
            elif line.get("event") == "released":
                term = open_terms.pop((line["partition"], line["fence"]), None)
                if term is not None:
                    term.end_us = line["at_us"]
        if replica.killed_at_us is not None:
            # A killed process stops believing anything when it dies.
            for term in open_terms.values():
                term.end_us = replica.killed_at_us
    return terms


def current_owners(replicas: list[Replica]) -> dict[str, str]:
    owners = {}
    for partition, terms in terms_of(replicas).items():
        running = [t for t in terms if t.end_us is None]
        if len(running) == 1:
            owners[partition] = running[0].holder
    return owners


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def test_rust_and_python_replicas_share_one_group(redis_server, rust_bench, name):
    url = redis_server.url
    common = ["--redis-url", url, "--group", name, "--partitions", str(PARTITIONS),
              "--lease-ms", str(LEASE_MS)]
    commands = {
        "rust-1": [rust_bench, "partition-child", *common, "--replica", "rust-1",
                   "--ledger-url", url],
        "py-1": [sys.executable, os.path.join(HERE, "replica.py"), *common, "--replica", "py-1"],
        "py-2": [sys.executable, os.path.join(HERE, "replica.py"), *common, "--replica", "py-2"],
    }
    replicas = []
    for replica_name, command in commands.items():
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        replica = Replica(replica_name, process)
        threading.Thread(target=replica.read, daemon=True).start()
        replicas.append(replica)
    try:
        # All three share the partitions: 8 each.
        def shared() -> bool:
            owners = current_owners(replicas)
            counts = [list(owners.values()).count(r.name) for r in replicas]
            return len(owners) == PARTITIONS and counts == [8, 8, 8]

        wait_for(shared, 30, "8 partitions on each of the 3 replicas")
        time.sleep(1.0)  # fenced work in every process

        victim = replicas[2]
        held = {p for p, owner in current_owners(replicas).items() if owner == victim.name}
        assert len(held) == 8
        victim.process.send_signal(signal.SIGKILL)
        victim.killed_at_us = time.time_ns() // 1000
        victim.process.wait()

        def retaken() -> bool:
            owners = current_owners(replicas)
            return all(owners.get(p) in ("rust-1", "py-1") for p in held)

        wait_for(retaken, 15, "the killed replica's partitions to be owned again")
        terms = terms_of(replicas)
        for partition in held:
            new_start = min(
                t.start_us for t in terms[partition] if t.start_us > victim.killed_at_us
            )
            gap_ms = (new_start - victim.killed_at_us) / 1000
            assert gap_ms <= LEASE_MS + RENEW_MS + SLACK_MS, (
                f"{partition} owned again {gap_ms:.0f} ms after the kill"
            )
        time.sleep(1.0)
    finally:
        for replica in replicas:
            if replica.process.poll() is None:
                replica.process.send_signal(signal.SIGTERM)
        for replica in replicas:
            try:
                replica.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait()
    time.sleep(0.1)

    terms = terms_of(replicas)
    counts = {r.name: sum(1 for line in r.lines if line.get("event") == "owned") for r in replicas}
    assert all(count > 0 for count in counts.values()), counts
    for partition, partition_terms in terms.items():
        ordered = sorted(partition_terms, key=lambda t: t.start_us)
        for earlier, later in zip(ordered, ordered[1:]):
            assert later.fence > earlier.fence, f"{partition}: fences out of order {ordered}"
            if earlier.holder != later.holder:
                assert earlier.end_us is not None and earlier.end_us <= later.start_us, (
                    f"{partition}: {later.holder} started while {earlier.holder} still held it"
                )
    # The resource's own view: every partition's ledger in fence order, written by
    # both languages across the group.
    client = redis.Redis.from_url(url, decode_responses=True)
    writers = set()
    for index in range(PARTITIONS):
        partition = f"p{index:04}"
        records = [r.split(",") for r in client.lrange(f"ledger:{{{partition}}}", 0, -1)]
        fences = [int(record[2]) for record in records]
        assert fences, f"{partition}: no fenced writes"
        assert fences == sorted(fences), f"{partition}: ledger fences out of order"
        writers |= {record[1] for record in records}
    assert writers == {"rust-1", "py-1", "py-2"}
