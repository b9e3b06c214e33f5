"""A client that sends each request straight to its tenant's owner: the Python twin of
``examples/router.rs client`` (it works against Rust or Python replicas:
``router_replica.py``).

It keeps a :class:`leasehold.Router` of the group ``tenants`` (one pub/sub
subscription, checked once a minute: a still group costs it nothing else), picks the
tenants in turn at a steady rate, looks each one's owner up (``router.owner``: a map
read, no I/O) and sends ``GET /tenants/{tenant}/orders`` to the owner's address,
following at most one redirect (a ``421`` naming the owner in ``x-leasehold-owner``).
At the end it prints one JSON line: ``requests``, ``ok`` (served by the first replica
asked), ``redirected`` (served after one redirect), ``unavailable`` (no owner known, a
``503``, or the named owner not running: a killed owner's tenants until its lease
runs out; ``unreachable`` counts those last ones apart) and ``failed`` (anything
else: not served although the tenant had an owner), with the first failures' reasons.

    python router_client.py --requests-per-s 200 --seconds 30

Kill a replica, start another or stop one with Ctrl-C while the client runs: its
``failed`` stays 0. Flags: ``--redis-url`` (``REDIS_URL``, default
``redis://127.0.0.1:6379/``), ``--tenants`` (default 64), ``--requests-per-s``
(default 100), ``--seconds`` (default 10), ``--ready-timeout`` (default 30). HTTP is
the standard library's: a tiny asyncio HTTP/1.1 client with kept-alive connections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from dataclasses import dataclass, field

import leasehold

GROUP = "tenants"
OWNER_HEADER = "x-leasehold-owner"
REQUEST_TIMEOUT = 5.0
CONNECT_TIMEOUT = 1.0
FAILURES_KEPT = 10


class Unreachable(Exception):
    """Nothing answers at the address (refused, or the connection broke under the
    request): the owner is not running."""


class HttpClient:
    """GET over HTTP/1.1 with a pool of kept-alive connections per address."""

    def __init__(self) -> None:
        self.idle: dict[str, list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}

    async def get(self, address: str, path: str) -> tuple[int, dict[str, str]]:
        """The status and headers of ``GET http://{address}{path}`` (body read)."""
        pooled = self.idle.get(address)
        if pooled:
            reader, writer = pooled.pop()
            try:
                return await self.exchange(address, path, reader, writer)
            except Unreachable:
                pass  # closed while idle (a replica that left): once more, afresh
        host, _, port = address.rpartition(":")
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, int(port)), CONNECT_TIMEOUT
            )
        except (OSError, asyncio.TimeoutError) as err:
            raise Unreachable(f"{address}: {err}") from err
        return await self.exchange(address, path, reader, writer)

    async def exchange(
        self, address: str, path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[int, dict[str, str]]:
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nhost: {address}\r\n\r\n".encode())
            await writer.drain()
            status_line = await reader.readline()
            if not status_line:
                raise Unreachable(f"{address}: closed before a reply")
            status = int(status_line.split()[1])
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            await reader.readexactly(int(headers.get("content-length", "0")))
        except (ConnectionError, asyncio.IncompleteReadError) as err:
            writer.close()
            raise Unreachable(f"{address}: {err!r}") from err
        except BaseException:
            writer.close()
            raise
        if headers.get("connection", "").lower() == "close":
            writer.close()
        else:
            self.idle.setdefault(address, []).append((reader, writer))
        return status, headers

    def close(self) -> None:
        for connections in self.idle.values():
            for _, writer in connections:
                writer.close()
        self.idle.clear()


@dataclass
class Tally:
    """The client's counts."""

    ok: int = 0
    redirected: int = 0
    unavailable: int = 0
    unreachable: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)

    def fail(self, why: str) -> None:
        self.failed += 1
        if len(self.failures) < FAILURES_KEPT:
            self.failures.append(why)

    def summary(self) -> str:
        requests = self.ok + self.redirected + self.unavailable + self.failed
        return json.dumps({
            "requests": requests,
            "ok": self.ok,
            "redirected": self.redirected,
            "unavailable": self.unavailable,
            "unreachable": self.unreachable,
            "failed": self.failed,
            "failures": self.failures,
        })


async def call(router: leasehold.Router, http: HttpClient, tenant: str, tally: Tally) -> None:
    """Sends a request for ``tenant`` to its owner as ``router`` names it, following at
    most one redirect, and counts how it ended."""
    route = router.owner(tenant)
    if route is None:
        tally.unavailable += 1  # no owner known now
        return
    if route.address is None:
        tally.fail(f"{tenant}: its owner {route.replica} advertises no address")
        return
    path = f"/tenants/{tenant}/orders"
    asked = route.address
    try:
        status, headers = await asyncio.wait_for(http.get(asked, path), REQUEST_TIMEOUT)
        redirected = status == 421 and OWNER_HEADER in headers
        if redirected:
            asked = headers[OWNER_HEADER]
            status, headers = await asyncio.wait_for(http.get(asked, path), REQUEST_TIMEOUT)
    except Unreachable:
        tally.unavailable += 1
        tally.unreachable += 1
        return
    except asyncio.TimeoutError:
        tally.fail(f"{tenant}: {asked} gave no reply within {REQUEST_TIMEOUT} s")
        return
    except (OSError, ValueError, IndexError) as err:
        tally.fail(f"{tenant}: {asked}: {err!r}")
        return
    if status == 200:
        if redirected:
            tally.redirected += 1
        else:
            tally.ok += 1
    elif status == 503:
        tally.unavailable += 1  # between a release and the next claim
    else:
        via = f"{route.address} redirected to {asked}, which" if redirected else asked
        tally.fail(f"{tenant}: {via} answered {status}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"))
    parser.add_argument("--tenants", type=int, default=64)
    parser.add_argument("--requests-per-s", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--ready-timeout", type=float, default=30.0)
    args = parser.parse_args()
    if not args.requests_per_s > 0:
        parser.error(f"--requests-per-s must be positive, not {args.requests_per_s}")
    tenants = [f"tenant-{i:02}" for i in range(args.tenants)]

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async with leasehold.Router(args.redis_url, GROUP) as router:
        print(f"client: reading the owners of group {GROUP!r} on {args.redis_url}", flush=True)
        try:
            await router.ready(timeout=args.ready_timeout)
        except leasehold.Timeout as err:
            print(f"client: {err}", file=sys.stderr)
            return 1
        print(
            f"client: {router.status().routes} tenants routed; sending "
            f"{args.requests_per_s} requests per second for {args.seconds} s",
            flush=True,
        )
        http, tally = HttpClient(), Tally()
        running: set[asyncio.Task[None]] = set()
        start = loop.time()
        interval = 1.0 / args.requests_per_s
        i = 0
        while not stop.is_set() and loop.time() - start < args.seconds:
            task = asyncio.ensure_future(call(router, http, tenants[i % len(tenants)], tally))
            running.add(task)
            task.add_done_callback(running.discard)
            i += 1
            # A steady rate on average: behind (a busy machine), catch up in a burst.
            delay = start + i * interval - loop.time()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except asyncio.TimeoutError:
                    pass
        if running:
            await asyncio.wait(running)
        http.close()
    print(tally.summary(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
