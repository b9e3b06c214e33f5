"""A consumer per tenant, exactly once: the Python twin of the Rust example
``examples/stream_consumer.rs``, on the same group, keys and formats, so Python and
Rust replicas can share one group.

Every tenant has a Redis stream; the running replicas share the tenants (a partition
group balanced by the tenants' measured arrival rates), and each entry's output lands
exactly once, through kills, joins, graceful leaves and paused owners.

For each tenant it owns, a replica reads ``stream:{tenant-07}`` with ``XREAD`` and, for
each entry in order, appends the entry's id to ``out:{tenant-07}`` and moves
``cursor:{tenant-07}`` to it in one fenced batch (``FencedWriter.batch``), so output and
cursor never disagree and a deposed owner's write is refused. A new term raises the two
keys' fences *before* it reads where to resume (``docs/fencing.md``, "Resuming exactly
once"); on a planned move the old owner hands its cursor to the next
(``lease.hand_off``). Each replica serves ``/livez`` (also ``/healthz``), ``/readyz``
(200 once it holds its share of the tenants), ``/owned`` (the tenants it owns, as JSON)
and ``/metrics`` (this example's counters, in Prometheus's text format) on one port,
with the standard library's asyncio server. The first SIGINT (Ctrl-C) or SIGTERM
leaves gracefully, handing every cursor over.

    python stream_consumer.py produce --rate 10
    python stream_consumer.py consume --replica replica-a --port 8081
    python stream_consumer.py consume --replica replica-b --port 8082
    curl -s localhost:8081/owned

Flags (or environment): ``--redis-url`` (``REDIS_URL``, default
``redis://127.0.0.1:6379/``), ``--tenants`` (default 8); for ``consume``: ``--replica``
(``REPLICA_ID``, default ``replica-<pid>``), ``--port`` (``HTTP_PORT``, default 8080;
every interface; 0: any free port), ``--lease-ms`` (default 3000); for ``produce``:
``--rate`` (entries per second for a tenant of weight 1; tenant i gets
``rate × (1 + (i − 1) mod 3)``). Needs redis-py (``pip install redis``) beside
``leasehold``. ``python/tests/test_stream_consumer.py`` runs it (and the Rust example in
one group with it) against a real redis-server and checks that every tenant's output is
its stream's ids, in order, once each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import redis.asyncio as aredis
from redis.exceptions import RedisError

from leasehold import (
    Coordinator,
    FenceRejected,
    FencedBatch,
    FencedWriter,
    HandOffError,
    LeaseholdError,
    PartitionLease,
    Stopped,
    TermOver,
)

GROUP = "stream-consumers"
"""The partition group the consumers form (the Rust example's)."""
READ_COUNT = 100
"""Entries read per ``XREAD``."""
READ_BLOCK_MS = 200
"""How long an ``XREAD`` waits for new entries: short, since the loop also samples the
arrival rate between reads."""
REPORT_EVERY = 1.0
"""How often, in seconds, an owner measures its tenant's arrival rate and reports it."""


def say(line: str) -> None:
    print(line, flush=True)


@dataclass(frozen=True)
class Keys:
    """The keys of one tenant. One hash tag, ``{tenant-07}``: a fenced batch is one
    script, and one script touches the keys of one Redis Cluster slot only."""

    stream: str
    out: str
    cursor: str

    @classmethod
    def of(cls, tenant: str) -> Keys:
        return cls(f"stream:{{{tenant}}}", f"out:{{{tenant}}}", f"cursor:{{{tenant}}}")


@dataclass
class Counters:
    """This example's metrics (``/metrics``)."""

    entries: dict[str, int] = field(default_factory=dict)
    arrivals: dict[str, float] = field(default_factory=dict)
    deposed: int = 0

    def render(self) -> str:
        lines = [
            "# HELP stream_consumer_entries_total Entries processed (output and cursor "
            "committed), by tenant",
            "# TYPE stream_consumer_entries_total counter",
        ]
        lines += [
            f'stream_consumer_entries_total{{tenant="{t}"}} {n}'
            for t, n in sorted(self.entries.items())
        ]
        lines += [
            "# HELP stream_consumer_arrivals_per_second Entries appended to the tenant's "
            "stream per second, as reported as its load",
            "# TYPE stream_consumer_arrivals_per_second gauge",
        ]
        lines += [
            f'stream_consumer_arrivals_per_second{{tenant="{t}"}} {r}'
            for t, r in sorted(self.arrivals.items())
        ]
        lines += [
            "# HELP stream_consumer_deposed_total Terms that found a newer term had "
            "written or raised their keys",
            "# TYPE stream_consumer_deposed_total counter",
            f"stream_consumer_deposed_total {self.deposed}",
        ]
        return "\n".join(lines) + "\n"


async def commit_whole(batch: FencedBatch, lease: PartitionLease) -> bool:
    """Commits ``batch`` to its end, even if this task is cancelled meanwhile (the
    library cancels a handler when its term ends); returns whether it was, for the
    caller to cancel itself again once it has recorded the commit.

    Cut off, a commit's outcome is unknown (cancelling the awaitable drops the Rust
    future, which may or may not have sent the script), and the cursor handed off
    could then be behind the committed one: the next owner would output that entry
    again. (The Rust example never races a commit against ``cancelled()``, likewise.)
    """
    commit = asyncio.ensure_future(batch.commit(lease))
    cancelled = False
    while not commit.done():
        try:
            # Unlike awaiting `commit` itself, a cancellation of this task does not
            # cancel `commit`.
            await asyncio.wait({commit})
        except asyncio.CancelledError:
            cancelled = True
    commit.result()  # FenceRejected, StoreError, ...
    return cancelled


class Arrivals:
    """Measures a tenant's arrival rate: entries appended to its stream per second.

    Reported as the tenant's load, not the rate this owner processes: right after a
    move the new owner catches up with a backlog, several times its arrival rate for a
    while, which would look like a step in load and move tenants for nothing.
    """

    def __init__(self) -> None:
        self.last: tuple[float, int] | None = None

    async def report(
        self, redis: aredis.Redis, stream: str, tenant: str, lease: PartitionLease, counters: Counters
    ) -> None:
        """Samples ``XLEN`` once per ``REPORT_EVERY`` and reports the rate since the last
        sample. (These streams are never trimmed; a trimmed stream would sample
        ``XINFO STREAM``'s ``entries-added``.)"""
        now = time.monotonic()
        if self.last is not None and now - self.last[0] < REPORT_EVERY:
            return
        try:
            length = int(await redis.xlen(stream))
        except RedisError:
            return  # measured at the next read
        if self.last is not None:
            at, before = self.last
            rate = max(length - before, 0) / (now - at)
            lease.report_load(rate)
            counters.arrivals[tenant] = rate
        self.last = (now, length)


class Consumer:
    """What every tenant's handler shares: the writer, the Redis client for the
    streams and the cursors, the counters."""

    def __init__(self, url: str, replica: str) -> None:
        self.replica = replica
        self.writer = FencedWriter(url)
        # redis-py's pool gives each concurrent call a connection of its own, so a
        # blocked XREAD holds up no other tenant (the leases are renewed by the Rust
        # core, on connections of its own).
        self.redis = aredis.Redis.from_url(
            url, decode_responses=True, socket_timeout=READ_BLOCK_MS / 1000 + 2
        )
        self.counters = Counters()

    async def serve(self, tenant: str, lease: PartitionLease) -> None:
        """One tenant, for one term of this replica's ownership."""
        me, keys, fence = self.replica, Keys.of(tenant), lease.fence

        # (1) Raise both keys' fences to this term's, before reading anything. Until a
        # key has seen this term's fence, a deposed owner's write still carries a fence
        # the key accepts: one sent before a pause or a partition, landing now. If it
        # landed after the read below, the cursor would move under this term, which
        # would process that entry again and output it twice. After the raise it is
        # refused (FenceRejected), so what the read finds is final; a deposed write
        # that landed before the raise is part of it, output and cursor together (4).
        try:
            await self.writer.batch().raise_fence(keys.out).raise_fence(keys.cursor).commit(
                lease
            )
        except FenceRejected as e:
            self.deposed(tenant, lease, e)
            return
        # (2) Where the previous owner stopped, if it handed that over: offered only
        # when its term was the one just before this and gave its lease back, so it is
        # the committed cursor (no read needed). (3) Else the committed cursor.
        handed = lease.handed_over()
        if handed is not None:
            cursor, source = handed.decode(), "handed over"
        else:
            committed = await self.redis.get(keys.cursor)
            if isinstance(committed, bytes):
                committed = committed.decode()
            cursor = committed or "0-0"
            source = f"committed; {lease.no_hand_off()}"
        say(f"{me}: {tenant}: fence {fence}: resuming after {cursor} ({source})")

        arrivals = Arrivals()
        read_failing = False
        try:
            # (4) Process from there, in order.
            while True:
                # The library cancels this task when the term ends; the check ends it
                # too should the cancellation be lost (redis-py 8.2 on Python 3.11
                # swallows about one in three hundred during a blocking XREAD).
                lease.check()
                await arrivals.report(self.redis, keys.stream, tenant, lease, self.counters)
                try:
                    ids = await self.read_after(keys.stream, cursor)
                    read_failing = False
                except RedisError as e:
                    # A read changes nothing: try again in a moment.
                    if not read_failing:
                        say(f"{me}: {tenant}: reading the stream failed ({e}); retrying")
                    read_failing = True
                    await asyncio.sleep(READ_BLOCK_MS / 1000)
                    continue
                for entry in ids:
                    # The term may have ended meanwhile (also a local deadline passed in
                    # a pause): TermOver.
                    lease.check()
                    # The entry's output and the cursor moved to it: both or neither.
                    step = self.writer.batch().rpush(keys.out, entry).set(keys.cursor, entry)
                    try:
                        cancelled = await commit_whole(step, lease)
                    except FenceRejected as e:
                        self.deposed(tenant, lease, e)
                        return
                    # Any other error (no reply: a timeout, a broken connection): the
                    # batch may have landed. It propagates, ending the term as failed
                    # without handing a cursor off: the next term raises first (refusing
                    # this batch if it is still on its way) and reads the cursor, which
                    # says whether it landed.
                    cursor = entry
                    self.counters.entries[tenant] = self.counters.entries.get(tenant, 0) + 1
                    if cancelled:
                        raise asyncio.CancelledError
        except (asyncio.CancelledError, TermOver):
            # The term is ending. On a planned move (a hand-over, a drain, a shutdown)
            # the cursor goes to the next owner with the release; after a lost lease
            # nothing is handed over and the next owner reads the committed cursor.
            self.hand_off(tenant, lease, cursor)
            raise
        finally:
            self.counters.arrivals.pop(tenant, None)

    def hand_off(self, tenant: str, lease: PartitionLease, cursor: str) -> None:
        me, why = self.replica, lease.end_reason or ""
        try:
            lease.hand_off(cursor.encode())
        except HandOffError:
            say(f"{me}: {tenant}: stopped at {cursor} ({why}): lease lost, nothing handed off")
            return
        if lease.successor is not None:
            say(f"{me}: {tenant}: handed off at {cursor} ({why}, to {lease.successor})")
        else:
            say(f"{me}: {tenant}: handed off at {cursor} ({why})")

    def deposed(self, tenant: str, lease: PartitionLease, e: FenceRejected) -> None:
        """A newer term owns the tenant and has written or raised its keys: stop
        quietly."""
        self.counters.deposed += 1
        say(f"{self.replica}: {tenant}: deposed: fence {lease.fence} refused ({e})")

    async def read_after(self, stream: str, cursor: str) -> list[str]:
        """The ids of the entries after ``cursor``, oldest first (none if nothing
        arrives within ``READ_BLOCK_MS``)."""
        # `[[stream, [(id, {field: value}), ...]]]`, or empty when nothing came.
        reply: Any = await self.redis.xread({stream: cursor}, count=READ_COUNT, block=READ_BLOCK_MS)
        return [entry_id for _, entries in reply or () for entry_id, _fields in entries]


class Http:
    """``/livez``, ``/healthz``, ``/readyz``, ``/owned`` and ``/metrics``: HTTP/1.0,
    one request per connection, on asyncio's own server."""

    def __init__(self, coordinator: Coordinator, counters: Counters) -> None:
        self.coordinator = coordinator
        self.counters = counters

    def respond(self, path: str) -> tuple[int, str, str]:
        """The status, content type and body of ``GET path``."""
        text = "text/plain; charset=utf-8"
        if path in ("/livez", "/healthz"):
            # 200 while the coordinator runs; 503 once it has stopped (restart me).
            # Redis being unreachable is no reason to restart: the replica waits.
            if self.coordinator.is_running:
                return 200, text, "ok\n"
            return 503, text, "stopped\n"
        if path == "/readyz":
            # 200 once this replica holds its share of the tenants; 503 with the reason
            # while it joins, settles, takes its share, is drained or leaves.
            try:
                view = self.coordinator.view()
            except Stopped as e:
                return 503, text, f"{e}\n"
            if view.ready:
                return 200, text, "ready\n"
            return 503, text, f"{view.not_ready or 'not ready'}\n"
        if path == "/owned":
            try:
                owned = sorted(self.coordinator.view().owned)
            except Stopped:
                owned = []
            return 200, "application/json", json.dumps(owned)
        if path == "/metrics":
            return 200, "text/plain; version=0.0.4", self.counters.render()
        return 404, text, "not found\n"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass  # the headers
            parts = request.decode("latin-1").split()
            if len(parts) >= 2 and parts[0] == "GET":
                status, kind, body = self.respond(parts[1].split("?", 1)[0])
            else:
                status, kind, body = 405, "text/plain; charset=utf-8", "GET only\n"
            data = body.encode()
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}.get(
                status, "Service Unavailable"
            )
            writer.write(
                f"HTTP/1.0 {status} {reason}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                + data
            )
            await writer.drain()
        except (OSError, asyncio.TimeoutError, UnicodeDecodeError):
            pass
        finally:
            writer.close()


def stop_on_signals() -> asyncio.Future[str]:
    """Resolves with the signal's name on the first SIGINT (Ctrl-C) or SIGTERM."""
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[str] = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):

        def stop(name: str = sig.name) -> None:
            if not stopped.done():
                stopped.set_result(name)

        loop.add_signal_handler(sig, stop)
    return stopped


async def consume(args: argparse.Namespace, tenants: list[str]) -> None:
    """One replica: the group's coordinator, and the HTTP server beside it."""
    stopped = stop_on_signals()
    url: str = args.redis_url
    replica: str = args.replica or f"replica-{os.getpid()}"
    consumer = Consumer(url, replica)
    coordinator = Coordinator(
        url,
        GROUP,
        tenants,
        replica=replica,
        lease=args.lease_ms / 1000,
        # Weights follow the arrival rates the owners report, damped (as the Rust
        # example's `weights_from_loads(LoadDamping::default())`).
        weights_from_loads=True,
    )
    http = Http(coordinator, consumer.counters)
    # Bound before joining: a port in use fails the start, not a running member.
    server = await asyncio.start_server(http.handle, "0.0.0.0", args.port)
    port = server.sockets[0].getsockname()[1]
    coordinator.start(consumer.serve)
    say(
        f"{replica}: consuming group '{GROUP}' on {url}; http://127.0.0.1:{port}/owned; "
        "Ctrl-C to leave"
    )

    async def follow_errors() -> None:
        error: str | None = None
        async for view in coordinator.views():
            if view.error != error:
                say(f"{replica}: {view.error}" if view.error else f"{replica}: taking part again")
                error = view.error

    errors = asyncio.ensure_future(follow_errors())
    signal_name = await stopped
    try:
        count = coordinator.view().count
    except LeaseholdError:
        count = 0
    say(f"{replica}: {signal_name}: leaving; handing {count} tenants over")
    errors.cancel()
    # Every handler is cancelled, hands its cursor off and returns; every lease is
    # released; the others take the tenants at once.
    await coordinator.shutdown()
    server.close()
    await server.wait_closed()
    await consumer.redis.aclose()
    say(f"{replica}: left the group")


async def produce(args: argparse.Namespace, tenants: list[str]) -> None:
    """The producer: appends ``n=<seq>`` to every tenant's stream at its rate until the
    first SIGINT or SIGTERM, then prints how many entries each stream got."""
    stopped = stop_on_signals()
    rate: float = args.rate
    if not (rate > 0 and rate != float("inf")):
        raise SystemExit(f"--rate must be a positive number, not {rate}")
    url: str = args.redis_url
    client = aredis.Redis.from_url(url, decode_responses=True)
    appended = dict.fromkeys(tenants, 0)

    async def append(index: int, tenant: str) -> None:
        stream = Keys.of(tenant).stream
        every = 1 / (rate * (1 + index % 3))
        failing = False
        next_at = time.monotonic()
        while True:
            next_at = max(next_at + every, time.monotonic())
            await asyncio.sleep(next_at - time.monotonic())
            try:
                await client.xadd(stream, {"n": appended[tenant] + 1})
            except RedisError as e:
                if not failing:
                    say(f"producer: {tenant}: waiting for Redis ({e})")
                failing = True
                continue
            appended[tenant] += 1
            failing = False

    tasks = [asyncio.ensure_future(append(i, t)) for i, t in enumerate(tenants)]
    say(f"producer: appending to {len(tasks)} streams on {url}; Ctrl-C to stop")
    signal_name = await stopped
    say(f"producer: {signal_name}: stopping")
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.aclose()
    for tenant in sorted(appended):
        say(f"producer: {tenant}: appended {appended[tenant]}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/")
    )
    common.add_argument("--tenants", type=int, default=8, help="tenant-01, tenant-02, ...")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    modes = parser.add_subparsers(dest="mode", required=True)
    consume_args = modes.add_parser(
        "consume", parents=[common], help="consume the tenants' streams as one replica"
    )
    consume_args.add_argument("--replica", default=os.environ.get("REPLICA_ID"))
    consume_args.add_argument("--port", type=int, default=int(os.environ.get("HTTP_PORT", 8080)))
    consume_args.add_argument("--lease-ms", type=int, default=3000)
    produce_args = modes.add_parser(
        "produce", parents=[common], help="append entries to every tenant's stream"
    )
    produce_args.add_argument("--rate", type=float, default=10.0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.WARNING)
    args = parse(argv)
    tenants = [f"tenant-{i:02}" for i in range(1, args.tenants + 1)]
    if args.mode == "consume":
        asyncio.run(consume(args, tenants))
    else:
        asyncio.run(produce(args, tenants))


if __name__ == "__main__":
    main()
