"""``examples/router_replica.py`` and ``examples/router_client.py`` as a fleet of
processes against the suite's redis-server: while the client sends requests, one
replica is killed (SIGKILL), one joins and one leaves gracefully (SIGTERM), and every
request for a tenant with an owner is served (``failed == 0``); a replica answers
``200`` for a tenant it owns, ``421`` naming the owner for one it does not, ``404``
for one that is not the group's."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import free_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TENANTS = 16
LIMIT = 45.0
"""Any wait for the fleet to reach a state: generous for a busy 2-core machine."""


class Replica:
    def __init__(self, name: str, url: str) -> None:
        self.name, self.port = name, free_port()
        self.process = subprocess.Popen(
            [sys.executable, str(EXAMPLES / "router_replica.py"), "--redis-url", url,
             "--tenants", str(TENANTS), "--replica", name, "--port", str(self.port),
             "--lease-ms", "1000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def get(self, path: str) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            headers = {k.lower(): v for k, v in response.getheaders()}
            return response.status, headers, response.read().decode()
        finally:
            connection.close()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + LIMIT
        while True:
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None:
                pytest.fail(f"{self.name} exited: {self.process.stdout.read()}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name} never became ready")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def test_every_request_for_an_owned_tenant_is_served_through_a_kill_a_join_and_a_leave(
    redis_url,
):
    replicas = {name: Replica(name, redis_url) for name in ("a", "b", "c")}
    client = None
    try:
        for replica in replicas.values():
            replica.wait_ready()

        # The HTTP contract, asked directly: 200 here, 421 naming the owner, 404.
        a = replicas["a"]
        answers = {}
        for i in range(TENANTS):
            status, headers, body = a.get(f"/tenants/tenant-{i:02}/orders")
            answers[status] = (headers, json.loads(body))
        assert answers[200][1]["replica"] == "a" and answers[200][1]["fence"] > 0
        headers, body = answers[421]
        owner_port = int(headers["x-leasehold-owner"].rpartition(":")[2])
        assert body["owner"] == headers["x-leasehold-owner"]
        assert owner_port in {replicas["b"].port, replicas["c"].port}
        assert a.get("/tenants/stranger/orders")[0] == 404

        client = subprocess.Popen(
            [sys.executable, str(EXAMPLES / "router_client.py"), "--redis-url", redis_url,
             "--tenants", str(TENANTS), "--requests-per-s", "50", "--seconds", "16"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)
        replicas["b"].process.send_signal(signal.SIGKILL)  # its tenants move after a lease
        time.sleep(4)
        replicas["d"] = Replica("d", redis_url)  # joins: tenants move to it
        replicas["d"].wait_ready()
        time.sleep(2)
        replicas["c"].process.send_signal(signal.SIGTERM)  # leaves gracefully
        out, _ = replicas["c"].process.communicate(timeout=LIMIT)
        assert replicas["c"].process.returncode == 0, out
        assert "left the group" in out

        out, err = client.communicate(timeout=LIMIT + 16)
        assert client.returncode == 0, err
        summary = json.loads(out.strip().splitlines()[-1])
        print(summary)
        assert summary["failed"] == 0, summary
        assert summary["ok"] > 0 and summary["redirected"] >= 0, summary
        assert summary["requests"] > 300, summary
    finally:
        if client is not None and client.poll() is None:
            client.kill()
            client.wait()
        for replica in replicas.values():
            replica.stop()
