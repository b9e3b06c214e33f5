"""The bench's child processes (``python -m leasehold.bench _child ...``).

Each prints JSON event lines on stdout (``{"event": ..., ...}``); times are wall
clock (``time.time()``), the one clock the bench and its children share.

``leader``: one elector (leasehold's or the guide's) for one duty.

- ``leading`` once its duty starts (``fence``, ``t``);
- ``--mode block``: the duty then blocks the event loop with ``time.sleep(3 *
  lease)`` and on resuming reports ``resumed`` (``t``, ``kept``: whether it still
  held the lease, checked at once, before the event loop runs anything else);
- ``duty_ended`` (``t``) when the duty stops (cancelled or returned);
- on SIGTERM: ``stepping_down`` (``t``: when the handler starts stepping down), then
  it steps down (leasehold: ``await elector.shutdown()``; guide: cancel the
  campaign task, whose ``finally`` releases) and reports ``stopped``
  (``duty_done``: whether its duty had stopped by then).

``replica``: one replica of a partition group (leasehold's ``Coordinator`` or the
guide's ``lead_partitions``); reports ``count`` lines (``owned``, ``terms``, ...)
every ``--report-every`` seconds, and leaves on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import time
from typing import Any

from ._util import cancel_until_done, emit, exit_with_parent


def add_arguments(parser: argparse.ArgumentParser) -> None:
    roles = parser.add_subparsers(dest="role", required=True)
    leader = roles.add_parser("leader")
    leader.add_argument("--impl", choices=("leasehold", "guide"), required=True)
    leader.add_argument("--url", required=True)
    leader.add_argument("--duty", required=True)
    leader.add_argument("--replica", required=True)
    leader.add_argument("--lease-ms", type=int, required=True)
    leader.add_argument("--mode", choices=("kill", "term", "block"), required=True)
    replica = roles.add_parser("replica")
    replica.add_argument("--impl", choices=("leasehold", "guide"), required=True)
    replica.add_argument("--url", required=True)
    replica.add_argument("--group", required=True)
    replica.add_argument("--partitions", type=int, required=True)
    replica.add_argument("--replica", required=True)
    replica.add_argument("--lease-ms", type=int, required=True)
    replica.add_argument("--report-every", type=float, default=0.25)
    replica.add_argument("--guide-pool", type=int, default=50)


def partition_names(count: int) -> list[str]:
    """``p0000``, ``p0001``, ..."""
    width = max(4, len(str(count - 1)))
    return [f"p{i:0{width}d}" for i in range(count)]


def main(args: argparse.Namespace) -> int:
    exit_with_parent()
    logging.basicConfig(
        level=logging.WARNING, format=f"[{args.replica}] %(name)s %(levelname)s: %(message)s"
    )
    if args.role == "leader":
        run = leader_leasehold if args.impl == "leasehold" else leader_guide
    else:
        run = replica_leasehold if args.impl == "leasehold" else replica_guide
    asyncio.run(run(args))
    return 0


# --- leader --------------------------------------------------------------------------


def _on_sigterm(step_down: Any) -> asyncio.Event:
    """Installs the SIGTERM handler: records the step-down's start, then steps down.
    Returns the event set once it has."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    started: list[asyncio.Task[None]] = []

    async def stepping_down() -> None:
        try:
            await step_down()
        finally:
            done.set()

    def handler() -> None:
        if started:
            return
        emit("stepping_down", t=time.time())
        started.append(loop.create_task(stepping_down()))

    loop.add_signal_handler(signal.SIGTERM, handler)
    return done


async def leader_leasehold(args: argparse.Namespace) -> None:
    import redis

    import leasehold

    lease_s = args.lease_ms / 1000
    elector = leasehold.Elector(args.url, args.duty, replica=args.replica, lease=lease_s)
    duty: dict[str, asyncio.Task[Any] | None] = {"task": None}
    sync = redis.Redis.from_url(args.url, decode_responses=True) if args.mode == "block" else None
    if sync is not None:
        sync.ping()  # connected now, so the check after the block is one round trip
    key = f"leasehold:{{{args.duty}}}:lease"

    async def lead(lease: leasehold.Lease) -> None:
        duty["task"] = asyncio.current_task()
        emit("leading", fence=lease.fence, t=time.time(), remaining=lease.remaining())
        try:
            if args.mode == "block":
                time.sleep(3 * lease_s)  # blocks the event loop: the point of the test
                t = time.time()
                try:
                    lease.check()
                    checked = True
                except leasehold.TermOver:
                    checked = False
                lost = lease.is_lost
                holder = sync.get(key) if sync is not None else None
                emit(
                    "resumed",
                    t=t,
                    kept=checked and not lost,
                    check_ok=checked,
                    is_lost=lost,
                    remaining=lease.remaining(),
                    redis_holder_is_us=bool(holder and holder.startswith(args.replica + ":")),
                )
            await lease.lost()
        finally:
            emit("duty_ended", t=time.time(), end_reason=lease.end_reason)

    async def step_down() -> None:
        await elector.shutdown()
        task = duty["task"]
        emit("stopped", t=time.time(), duty_done=None if task is None else task.done())

    done = _on_sigterm(step_down)
    elector.start(lead)
    await done.wait()
    if sync is not None:
        sync.close()


async def leader_guide(args: argparse.Namespace) -> None:
    import redis
    import redis.asyncio

    from . import guide

    lease_s = args.lease_ms / 1000
    r = redis.asyncio.Redis.from_url(args.url)
    elector = guide.Elector(r, args.duty, ttl_ms=args.lease_ms, replica=args.replica)
    duty: dict[str, asyncio.Task[Any] | None] = {"task": None}
    sync = redis.Redis.from_url(args.url, decode_responses=True) if args.mode == "block" else None
    if sync is not None:
        sync.ping()  # connected now, so the check after the block is one round trip

    async def lead(fence: int) -> None:
        duty["task"] = asyncio.current_task()
        emit("leading", fence=fence, t=time.time())
        try:
            if args.mode == "block":
                time.sleep(3 * lease_s)  # blocks the event loop: the point of the test
                t = time.time()
                # Checked at once, before the event loop (and the renew task) runs again.
                holder = sync.get(elector.key) if sync is not None else None
                emit("resumed", t=t, kept=holder == elector.token, holder=holder)
            await asyncio.Event().wait()
        finally:
            emit("duty_ended", t=time.time())

    campaign = asyncio.ensure_future(elector.campaign(lead))

    async def step_down() -> None:
        # Cancelling the campaign: its `finally` releases the lease (if still ours).
        cancels = await cancel_until_done(campaign)
        task = duty["task"]
        emit(
            "stopped",
            t=time.time(),
            duty_done=None if task is None else task.done(),
            cancels=cancels,
        )

    done = _on_sigterm(step_down)
    await done.wait()
    # What the guide left running (its duty, its renew task) ends with the process.
    if sync is not None:
        sync.close()
    await r.aclose()


# --- replica of a partition group ----------------------------------------------------


class _Counter(logging.Handler):
    """Counts the guide's log records at ERROR and above (election errors, lost
    leadership) without printing each one."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors = 0
        self.lost = 0
        self.first: str | None = None
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if "lost leadership" in record.getMessage():
            self.lost += 1
            return
        self.errors += 1
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        self.last = text
        if self.first is None:
            self.first = text


async def _serve_replica(args: argparse.Namespace, run: Any, stop: Any, extra: Any) -> None:
    owned: set[str] = set()
    terms = [0]

    async def handle(partition: str, held: Any) -> None:
        owned.add(partition)
        terms[0] += 1
        try:
            if hasattr(held, "lost"):
                await held.lost()
            else:
                await asyncio.Event().wait()
        finally:
            owned.discard(partition)

    loop = asyncio.get_running_loop()
    leave = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, leave.set)
    task = asyncio.ensure_future(run(handle))
    emit("started", t=time.time())
    while not leave.is_set() and not task.done():
        emit("count", t=time.time(), owned=len(owned), terms=terms[0], **extra())
        try:
            await asyncio.wait_for(leave.wait(), args.report_every)
        except asyncio.TimeoutError:
            pass
    if task.done() and not task.cancelled() and task.exception() is not None:
        emit("failed", error=f"{type(task.exception()).__name__}: {task.exception()}")
    await stop(task)
    emit("count", t=time.time(), owned=len(owned), terms=terms[0], **extra())
    emit("stopped", t=time.time())


async def replica_leasehold(args: argparse.Namespace) -> None:
    import leasehold

    coordinator = leasehold.Coordinator(
        args.url,
        args.group,
        partition_names(args.partitions),
        replica=args.replica,
        lease=args.lease_ms / 1000,
    )

    def extra() -> dict[str, Any]:
        try:
            view = coordinator.view()
        except leasehold.LeaseholdError:
            return {}
        return {"view_count": view.count, "ready": view.ready, "failures": coordinator.failures}

    async def stop(task: asyncio.Task[None]) -> None:
        await coordinator.shutdown()

    await _serve_replica(args, coordinator.run, stop, extra)


async def replica_guide(args: argparse.Namespace) -> None:
    import redis.asyncio

    from . import guide

    counter = _Counter()
    election = logging.getLogger("election")
    election.addHandler(counter)
    election.propagate = False
    # The guide's 'r': one client for every elector of the replica. Its default pool
    # (100 connections, then "Too many connections") cannot serve a thousand electors
    # polling at once; a blocking pool queues them instead.
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        args.url, max_connections=args.guide_pool, timeout=None
    )
    r = redis.asyncio.Redis(connection_pool=pool)
    namespace = f"{args.group}:partition"

    def run(handle: Any) -> Any:
        return guide.lead_partitions(
            r, partition_names(args.partitions), args.replica, handle,
            ttl_ms=args.lease_ms, namespace=namespace,
        )

    stuck: dict[str, Any] = {}

    def extra() -> dict[str, Any]:
        return {
            "errors": counter.errors,
            "lost": counter.lost,
            "first_error": counter.first,
            "last_error": counter.last,
            **stuck,
        }

    async def stop(task: asyncio.Task[None]) -> None:
        started = time.monotonic()
        task.cancel()  # every campaign's `finally` releases what it holds
        await asyncio.wait({task}, timeout=2)
        if not task.done():
            # Campaigns that went on after their cancellation: redis-py swallowed it
            # (a cancel landing while a command is in flight), and the TaskGroup waits
            # for them. Count them, and cancel them again until they stop.
            campaigns = [
                t for t in asyncio.all_tasks()
                if getattr(t.get_coro(), "__qualname__", "") == "Elector.campaign"
            ]
            stuck["campaigns_still_running_2s_after_cancel"] = len(campaigns)
            await asyncio.gather(*(cancel_until_done(t, retry_after=0.2) for t in campaigns))
            await asyncio.wait({task}, timeout=5)
        stuck["shutdown_s"] = round(time.monotonic() - started, 3)
        for leftover in asyncio.all_tasks() - {asyncio.current_task()}:
            leftover.cancel()  # the duties and renew tasks the guide leaves behind
        await asyncio.sleep(0)
        await r.aclose()
        await pool.disconnect()

    await _serve_replica(args, run, stop, extra)
