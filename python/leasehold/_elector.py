"""``Elector``: one leader for a duty."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any, AsyncIterator, Awaitable, Callable

from ._ids import default_replica
from ._leasehold import Lease, _Elector
from ._runner import Runner
from ._terms import log, run_term
from .errors import Stopped, TermOver
from .types import ElectorStatus

Lead = Callable[[Lease], Awaitable[Any]]


class Elector(Runner):
    """Campaigns for a duty's fenced lease; runs ``lead(lease)`` while it leads.

    The lease is renewed by the Rust core on a thread of its own: never on this
    event loop, never with the GIL. A duty that blocks the loop (``time.sleep``, a CPU
    loop) does not lose the lease for it, and if the term ended meanwhile it sees so
    on resuming (``lease.check()`` raises :class:`~leasehold.TermOver`).

    Each term runs ``lead(lease)`` as an asyncio task. When the term ends (renewal
    refused, local deadline passed, :meth:`step_down`, :meth:`shutdown`) the task is
    **cancelled**. If ``lead`` raises, the term ends as failed: logged on the
    ``leasehold`` logger, counted in :attr:`failures`, the lease released, and the
    elector campaigns again after a growing backoff. If it returns, the lease is
    released and the elector campaigns again.

    Args:
        url: The Redis URL (``redis://``, ``rediss://``, with user and password).
        duty: The duty's name (letters, digits, ``-_.:``).
        replica: This replica's id; default ``<hostname>-<pid>``.
        lease: The lease in seconds (default 10). Failover after a crash takes at
            most this long; a loop stall never costs the lease.
        renew_interval: Seconds between renewals (default lease / 3).
        grace: Seconds a cancelled duty gets to finish before the lease is released
            anyway (default 5).
        key_prefix: Prefix of every Redis key (default ``leasehold``).
        dedicated: Renew from a thread of its own (default); ``False`` shares the
            core runtime's two threads (still off the event loop).

    Raises:
        ConfigError: A bad name, URL or duration.

    Example::

        async def lead(lease):
            while True:
                lease.check()             # before each side effect
                await writer.set("scheduler:last-run", "now", lease.fence)
                await asyncio.sleep(1)

        async with Elector("redis://127.0.0.1:6379/", "scheduler") as elector:
            await elector.campaign(lead)  # until cancelled; released on exit
    """

    _core: _Elector

    def __init__(
        self,
        url: str,
        duty: str,
        *,
        replica: str | None = None,
        lease: float | None = None,
        renew_interval: float | None = None,
        grace: float | None = None,
        key_prefix: str | None = None,
        dedicated: bool = True,
    ) -> None:
        self._core = _Elector(
            url,
            duty,
            replica if replica is not None else default_replica(),
            lease=lease,
            renew_interval=renew_interval,
            grace=grace,
            key_prefix=key_prefix,
            dedicated=dedicated,
        )
        self._init_runner()

    @property
    def duty(self) -> str:
        """The duty's name."""
        return self._core.duty

    @property
    def replica(self) -> str:
        """This replica's id."""
        return self._core.replica

    async def campaign(self, lead: Lead) -> None:
        """Campaigns and leads until cancelled (or :meth:`shutdown`), then releases.

        Runs ``lead(lease)`` for each term won, as a task that is cancelled when the
        term ends. Returns once the elector has stopped; cancelling this coroutine
        cancels the duty and releases the lease before the cancellation propagates.
        """
        self._start_core()
        try:
            while True:
                lease = await self._core.next_term()
                if lease is None:
                    return
                self.terms += 1
                if await run_term(lease, lambda: lead(lease), f"duty {self.duty!r}"):
                    self.failures += 1
        finally:
            await asyncio.shield(self._core.shutdown())

    def start(self, lead: Lead) -> asyncio.Task[None]:
        """Campaigns in the background (a task running :meth:`campaign`); returns it."""
        return self._start_task(self.campaign(lead), f"elector {self.duty!r}")

    async def shutdown(self) -> None:
        """Stops: cancels the duty, releases the lease (a follower takes over at
        once) and returns when it has. Idempotent."""
        await super().shutdown()

    @contextlib.asynccontextmanager
    async def leading(self) -> AsyncIterator[Lease]:
        """Leads for one term, as the block of an ``async with``: the door redis-py's
        ``Lock`` users know::

            async with Elector(url, "scheduler") as elector:
                async with elector.leading() as lease:
                    while True:
                        lease.check()
                        await writer.set("scheduler:last-run", "now", lease.fence)
                        await asyncio.sleep(1)

        Starts the elector and waits until it leads (for as long as it takes: wrap it
        in ``asyncio.timeout`` to bound the wait), then runs the block with the term's
        lease. If the term ends while the block runs (a lost lease, a
        :meth:`step_down`, a :meth:`shutdown`) the block is **cancelled** and the
        ``async with`` raises :class:`~leasehold.TermOver`, so the code after it never
        believes the block completed. An exception the block raises ends the term as
        failed (logged, counted in :attr:`failures`) and propagates.

        One term per elector: leaving the block, however it is left, shuts the elector
        down (the lease is released and a follower leads at once); nothing campaigns
        on while no block runs. To lead term after term, use :meth:`campaign`.

        Raises:
            Stopped: The elector was already started (:meth:`campaign`,
                :meth:`start`, an earlier ``leading()``), or stopped before it led.
            TermOver: The term ended while the block ran.
        """
        if self._started or self._task is not None:
            raise Stopped(f"elector {self.duty!r} was already started: leading() starts it")
        self._start_core()
        lease: Lease | None = None
        try:
            lease = await self._core.next_term()
            if lease is None:
                raise Stopped(f"elector {self.duty!r} stopped before it led")
            self.terms += 1
            try:
                async with _term_scope(lease, f"duty {self.duty!r}"):
                    yield lease
            except TermOver:
                raise
            except Exception:
                self.failures += 1
                raise
        finally:
            try:
                if lease is not None:
                    # The term ends as the block did (returned, failed) before the
                    # shutdown: `status().last_term` says how (bounded by the lease's
                    # local deadline).
                    await asyncio.wait({asyncio.ensure_future(lease.lost())})
            finally:
                await asyncio.shield(self._core.shutdown())

    async def wait_until_leader(self) -> int:
        """Waits until this elector leads; returns the term's fence.

        Raises:
            Stopped: The elector stopped first, or was not started.
        """
        return await self._core.wait_until_leader()

    async def step_down(self) -> bool:
        """If leading: ends the term and releases the lease so another replica leads
        (this one campaigns again after its backoff). Returns whether it led."""
        return await self._core.step_down()

    def status(self) -> ElectorStatus:
        """The elector's state now: its ``role`` (:class:`~leasehold.Role`),
        ``leader``, ``fence``, ``highest_fence``, ``last_error``, ``last_term``
        (``fence``, ``reason``, ``detail``, ``released``) and ``stalls``."""
        return ElectorStatus._of(self._core.status())

    async def __aenter__(self) -> Elector:
        return self

    def __repr__(self) -> str:
        return f"Elector(duty={self.duty!r}, replica={self.replica!r})"


@contextlib.asynccontextmanager
async def _term_scope(lease: Lease, what: str) -> AsyncIterator[None]:
    """Runs the enclosed block in the current task, cancelled when the term ends
    (then raises :class:`TermOver`); tells the Rust side how the block ended."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("Elector.leading() must run in an asyncio task")
    inside = True
    ended = False

    def on_lost(_: object) -> None:
        nonlocal ended
        if inside and not ended:
            ended = True
            task.cancel()

    lost = asyncio.ensure_future(lease.lost())
    lost.add_done_callback(on_lost)
    failure: str | None = None
    try:
        yield
    except asyncio.CancelledError:
        if ended and _uncancel(task) == 0:
            raise TermOver(f"the term of {what} ended (fence {lease.fence})") from None
        raise
    except TermOver:
        raise
    except Exception as error:
        log.error(
            "%s failed (fence %d): %s: %s",
            what,
            lease.fence,
            type(error).__name__,
            error,
            exc_info=error,
        )
        failure = f"{type(error).__name__}: {error}"
        raise
    finally:
        inside = False
        lost.remove_done_callback(on_lost)
        lost.cancel()
        lease._finish(failure)
    if ended:
        # The block swallowed the cancellation and returned: the term is over all
        # the same.
        _uncancel(task)
        raise TermOver(f"the term of {what} ended (fence {lease.fence})")


def _uncancel(task: asyncio.Task[Any]) -> int:
    """Takes back the cancellation this scope asked for (Python 3.11+: so that an
    outer ``asyncio.timeout`` or ``TaskGroup`` does not see it); returns how many are
    left. Python 3.10 cannot tell them apart: 0."""
    if sys.version_info >= (3, 11):
        return task.uncancel()
    return 0
