"""A replica that serves the tenants it owns over HTTP and redirects the rest: the
Python twin of ``examples/router.rs serve`` (same group, same HTTP contract, so Rust
and Python replicas and clients mix).

It joins the partition group ``tenants`` (``tenant-00``, ``tenant-01``, ...),
advertises ``127.0.0.1:<port>`` (``Coordinator(advertise=...)``) and answers
``GET /tenants/{tenant}/...``:

- ``200`` with ``{"tenant", "replica", "fence"}`` if it owns the tenant now
  (``coordinator.owns``: local, no I/O);
- ``421 Misdirected Request`` with the owner's address in ``x-leasehold-owner`` (and
  ``{"owner": ...}``) if another replica owns it, as its own ``Router`` says (counted:
  ``coordinator.misrouted``);
- ``503`` with ``retry-after: 1`` if no owner is known (it waits up to a second for
  one first);
- ``404`` for a tenant that is not the group's.

Also ``/livez`` and ``/readyz``. SIGTERM or Ctrl-C leaves gracefully: the tenants are
released and taken by the others at once, and the replica goes on answering (with
redirects to the new owners) until its router has heard of every new owner, then
exits 0. Only the standard library serves HTTP (asyncio streams, HTTP/1.1 keep-alive).

    python router_replica.py --replica replica-a --port 8081
    python router_replica.py --replica replica-b --port 8082
    curl -si localhost:8081/tenants/tenant-07/orders
    python router_client.py --requests-per-s 200 --seconds 30

Flags (or environment): ``--redis-url`` (``REDIS_URL``, default
``redis://127.0.0.1:6379/``), ``--tenants`` (default 64), ``--replica``
(``REPLICA_ID``, default ``replica-<pid>``), ``--port`` (``HTTP_PORT``, default 8080;
0 picks a free one), ``--lease-ms`` (default 3000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time

import leasehold

GROUP = "tenants"
OWNER_HEADER = "x-leasehold-owner"
SETTLE = 1.0
"""How long a request for a tenant with no owner here or elsewhere waits for one."""
DRAIN = 10.0
"""How long a leaving replica keeps redirecting at most, after releasing its tenants."""
DRAIN_GRACE = 0.5
"""After its router has heard of every new owner: a moment more for the clients'."""

REASONS = {200: "OK", 404: "Not Found", 421: "Misdirected Request", 503: "Service Unavailable"}


def tenants(n: int) -> list[str]:
    return [f"tenant-{i:02}" for i in range(n)]


class Response:
    def __init__(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        self.status, self.headers = status, headers or {}
        self.body = (body if isinstance(body, str) else json.dumps(body) + "\n").encode()

    def encode(self) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Status')}"]
        kind = "application/json" if self.body.startswith(b"{") else "text/plain"
        headers = {"content-type": kind, "content-length": str(len(self.body)), **self.headers}
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.body


def unavailable(why: str) -> Response:
    return Response(503, {"error": why}, {"retry-after": "1"})


class Replica:
    def __init__(self, args: argparse.Namespace) -> None:
        self.replica: str = args.replica or f"replica-{os.getpid()}"
        self.tenants = set(tenants(args.tenants))
        self.args = args
        self.connections: set[asyncio.StreamWriter] = set()

    async def run(self) -> None:
        # Bound before joining: a port in use fails the start, not a running member.
        server = await asyncio.start_server(self.connection, "127.0.0.1", self.args.port)
        host, port = server.sockets[0].getsockname()[:2]
        address = f"{host}:{port}"
        self.coordinator = leasehold.Coordinator(
            self.args.redis_url,
            GROUP,
            sorted(self.tenants),
            replica=self.replica,
            lease=self.args.lease_ms / 1000,
            # Stored with this replica's entry: the claim's move notices carry it to
            # every router.
            advertise=address,
        )
        # On the coordinator's connections: the two share one subscription.
        self.router = self.coordinator.router()

        async def handle(tenant: str, lease: leasehold.PartitionLease) -> None:
            # The tenant's work would run here; requests only ask `owns`.
            await lease.lost()

        self.coordinator.start(handle)
        print(f"{self.replica}: serving group {GROUP!r} at http://{address}/tenants/<tenant>/...",
              flush=True)

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()

        held = self.coordinator.view().owned
        print(f"{self.replica}: leaving; handing {len(held)} tenants over", flush=True)
        # Every lease released: the others claim the tenants at once.
        await self.coordinator.shutdown()
        # Clients whose routers have not heard of the new owners yet still come: go on
        # redirecting until this replica's router has heard of every one.
        try:
            await asyncio.wait_for(self.handed_over(held), DRAIN)
            await asyncio.sleep(DRAIN_GRACE)
        except asyncio.TimeoutError:
            pass
        server.close()
        for writer in list(self.connections):
            writer.close()
        await server.wait_closed()
        await self.router.shutdown()
        print(f"{self.replica}: left the group", flush=True)

    async def handed_over(self, held: frozenset[str]) -> None:
        changes = self.router.changes()  # subscribed before the first look

        def pending() -> bool:
            for tenant in held:
                route = self.router.owner(tenant)
                if route is None or route.replica == self.replica:
                    return True
            return False

        while pending():
            try:
                await anext(changes)
            except StopAsyncIteration:
                return

    async def tenant(self, tenant: str) -> Response:
        if tenant not in self.tenants:
            return Response(404, {"error": "no such tenant", "tenant": tenant})
        changes = self.router.changes()  # subscribed before the first look
        deadline = time.monotonic() + SETTLE
        while True:
            fence = self.coordinator.owns(tenant)
            if fence is not None:
                return Response(200, {"tenant": tenant, "replica": self.replica, "fence": fence})
            route = self.router.owner(tenant)
            if route is not None and route.replica != self.replica:
                # Another replica owns it: send the client there.
                self.coordinator.misrouted(tenant)
                if route.address is None:
                    return unavailable("the owner advertises no address")
                body = {"tenant": tenant, "owner": route.address, "replica": route.replica}
                return Response(421, body, {OWNER_HEADER: route.address})
            # Named here but not running here yet (or any more), or no owner now: it
            # settles within moments. Wait for a change of route (or recheck `owns`).
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(anext(changes), min(left, 0.05))
            except (asyncio.TimeoutError, StopAsyncIteration):
                pass
        self.coordinator.misrouted(tenant)
        return unavailable("no owner now")

    async def respond(self, path: str) -> Response:
        parts = path.split("?", 1)[0].split("/")
        if len(parts) >= 3 and parts[1] == "tenants" and parts[2]:
            return await self.tenant(parts[2])
        if path == "/livez":
            running = self.coordinator.is_running
            return Response(200, "ok\n") if running else Response(503, "stopped\n")
        if path == "/readyz":
            view = self.coordinator.view()
            return Response(200, "ready\n") if view.ready else Response(503, f"{view.not_ready}\n")
        return Response(404, {"error": "not found"})

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One HTTP/1.1 connection: GET requests, kept alive until the client closes."""
        self.connections.add(writer)
        try:
            while True:
                request = await reader.readline()
                if not request:
                    return
                close = False
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "connection" and value.strip().lower() == "close":
                        close = True
                method, path, *_ = request.decode("latin-1").split() + ["", ""]
                if method != "GET":
                    response = Response(405, {"error": "only GET"})
                else:
                    response = await self.respond(path)
                writer.write(response.encode())
                await writer.drain()
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.connections.discard(writer)
            writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"))
    parser.add_argument("--tenants", type=int, default=64)
    parser.add_argument("--replica", default=os.environ.get("REPLICA_ID"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("HTTP_PORT", "8080")))
    parser.add_argument("--lease-ms", type=int, default=3000)
    asyncio.run(Replica(parser.parse_args()).run())


if __name__ == "__main__":
    main()
