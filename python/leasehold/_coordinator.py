"""``Coordinator``: one owner per partition, shared across a group of replicas."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

from ._admin import GroupAdmin
from ._ids import default_replica
from ._leasehold import PartitionLease, _Coordinator
from ._router import Router
from ._runner import Runner
from ._terms import run_term
from .types import _Fields

Handle = Callable[[str, PartitionLease], Awaitable[Any]]


@dataclass(frozen=True)
class View:
    """This replica's view of its group, as of its last group tick.

    Every field is the Rust core's; a field it did not report raises
    :class:`~leasehold.LeaseholdError` (a package and core of different versions),
    never a silent default."""

    owned: frozenset[str]
    """Partitions this replica holds."""
    live_replicas: list[str]
    """Live replicas of the group (this one included once joined)."""
    away_replicas: list[str]
    """Replicas whose sessions lapsed but whose partitions are kept for them
    (``rejoin_grace``)."""
    partitions: int
    """Partitions in the group's set (P)."""
    cap: int
    """ceil(P/N): the most a replica holds at steady state (0 in a weighted group)."""
    floor: int
    """floor(P/N): the least (0 in a weighted group)."""
    share: float | None
    """In a weighted group: the load this replica balances to."""
    load: int
    """Weights of the owned partitions, summed (their count when unweighted)."""
    ready: bool
    """Joined, settled, granting, not drained and holding its share."""
    not_ready: str | None
    """Why not, when not ready."""
    joined: bool
    settling: bool
    drained: bool
    weighted: bool
    list_differs: bool
    """This replica's ``partitions`` differ from the group's set."""
    capacity: int
    handoffs: int
    """Partitions handed over so an under-loaded replica could take them."""
    error: str | None
    """The last error, if the last tick failed."""
    raw: dict[str, Any] = field(repr=False, compare=False)
    """Everything the Rust core reported, as a dict."""

    @property
    def count(self) -> int:
        """How many partitions this replica holds."""
        return len(self.owned)

    @classmethod
    def _of(cls, raw: dict[str, Any]) -> View:
        f = _Fields(raw, "view")
        return cls(
            owned=frozenset(f["owned"]),
            live_replicas=list(f["live_replicas"]),
            away_replicas=list(f["away_replicas"]),
            partitions=f["partitions"],
            cap=f["cap"],
            floor=f["floor"],
            share=f["share"],
            load=f["load"],
            ready=f["ready"],
            not_ready=f["not_ready"],
            joined=f["joined"],
            settling=f["settling"],
            drained=f["drained"],
            weighted=f["weighted"],
            list_differs=f["list_differs"],
            capacity=f["capacity"],
            handoffs=f["handoffs"],
            error=f["error"],
            raw=raw,
        )


class Coordinator(Runner):
    """Joins a group of replicas that share its partitions, one owner each.

    Each replica holds floor(P/N) or ceil(P/N) of the P partitions (N live
    replicas); a dead replica's partitions move within one lease, a graceful
    :meth:`shutdown` hands them over at once. Python and Rust replicas of one group
    share it: they run the same scripts on the same keys.

    For each partition it owns, ``handle(partition, lease)`` runs as an asyncio task,
    cancelled when the term ends (hand-over, drain, shutdown, lost lease). A handler
    that raises ends that term as failed: logged, counted in :attr:`failures`,
    released, and its partition is claimed again after a backoff. After a lost lease
    the term is over (no grace) before the handler's ``finally`` runs:
    ``lease.hand_off()`` there raises :class:`HandOffError`, which such a ``finally``
    catches. The leases are
    renewed by the Rust core on its own threads, never on this event loop.

    Args:
        url: The Redis URL.
        group: The group's name.
        partitions: The partition list; it seeds a group that does not exist yet (the
            group's set lives in Redis: :class:`GroupAdmin` changes it).
        replica: This replica's id (default ``<hostname>-<pid>``); keep it across
            restarts for sticky restarts with ``rejoin_grace``.
        lease: The lease in seconds (default 10).
        renew_interval: Seconds between group ticks (default lease / 3).
        key_prefix: Prefix of every Redis key (default ``leasehold``).
        capacity: This replica's relative size (default 1).
        rejoin_grace: Seconds a restart keeps this replica's partitions for it.
        list_version: Versions ``partitions``: a newer one replaces the group's set.
        weights_from_loads: Balance by the loads handlers report
            (``lease.report_load``).
        prepare_moves: Seconds a hand-over waits for its receiver to prepare.
        advertise: Where this replica serves requests (``"10.0.0.7:8080"``, a
            URL): stored with its membership, shown as ``address`` in
            :meth:`GroupAdmin.status` and by ``leasehold status`` / ``owner``. Not
            empty, at most 256 bytes, no control characters (default: none).

    Raises:
        ConfigError: A bad name, URL, list, duration or address.

    Example::

        async def handle(tenant, lease):
            while True:
                lease.check()
                await process_one_batch(tenant, lease.fence)

        async with Coordinator(url, "tenants", tenants, lease=3.0) as coordinator:
            await coordinator.run(handle)  # until cancelled; hands over on exit
    """

    _core: _Coordinator

    def __init__(
        self,
        url: str,
        group: str,
        partitions: Iterable[str],
        *,
        replica: str | None = None,
        lease: float | None = None,
        renew_interval: float | None = None,
        key_prefix: str | None = None,
        capacity: int | None = None,
        rejoin_grace: float | None = None,
        list_version: int | None = None,
        weights_from_loads: bool = False,
        prepare_moves: float | None = None,
        advertise: str | None = None,
    ) -> None:
        if isinstance(partitions, (str, bytes)):
            from .errors import ConfigError

            raise ConfigError("partitions must be a list of names, not one string")
        self._core = _Coordinator(
            url,
            group,
            list(partitions),
            replica if replica is not None else default_replica(),
            lease=lease,
            renew_interval=renew_interval,
            key_prefix=key_prefix,
            capacity=capacity,
            rejoin_grace=rejoin_grace,
            list_version=list_version,
            weights_from_loads=weights_from_loads,
            prepare_moves=prepare_moves,
            advertise=advertise,
        )
        self._init_runner()
        self._terms: set[asyncio.Task[bool]] = set()

    @property
    def group(self) -> str:
        """The group's name."""
        return self._core.group

    @property
    def replica(self) -> str:
        """This replica's id."""
        return self._core.replica

    async def run(self, handle: Handle) -> None:
        """Joins the group and serves its partitions until cancelled (or
        :meth:`shutdown`); on the way out, leaves gracefully (the others take its
        partitions at once)."""
        self._start_core()
        try:
            while True:
                lease = await self._core.next_term()
                if lease is None:
                    break
                self.terms += 1
                task = asyncio.ensure_future(self._serve(lease, handle))
                self._terms.add(task)
                task.add_done_callback(self._terms.discard)
        finally:
            await asyncio.shield(self._leave())

    async def _serve(self, lease: PartitionLease, handle: Handle) -> bool:
        partition = lease.partition or ""
        failed = await run_term(
            lease, lambda: handle(partition, lease), f"partition {partition!r} of {self.group!r}"
        )
        if failed:
            self.failures += 1
        return failed

    async def _leave(self) -> None:
        await self._core.shutdown()
        if self._terms:
            await asyncio.wait(set(self._terms))

    def start(self, handle: Handle) -> asyncio.Task[None]:
        """Serves in the background (a task running :meth:`run`); returns it."""
        return self._start_task(self.run(handle), f"coordinator of {self.group!r}")

    async def shutdown(self) -> None:
        """Leaves the group: every handler is cancelled, every partition released
        and handed to the other replicas at once. Returns when it has. Idempotent."""
        await super().shutdown()

    def view(self) -> View:
        """This replica's view of its group now.

        Raises:
            Stopped: The coordinator was not started.
        """
        return View._of(self._core.view())

    async def views(self) -> AsyncIterator[View]:
        """Every view as it changes (the current one first), until the coordinator
        stops::

            async for view in coordinator.views():
                print(view.count, "of", view.partitions, "ready" if view.ready else view.not_ready)
        """
        stream = self._core.views()
        first = True
        while True:
            if first:
                first = False
                yield self.view()
            raw = await stream.next()
            if raw is None:
                return
            yield View._of(raw)

    async def ready(self) -> None:
        """Waits until this replica is ready in its group's sense: joined, settled,
        granting, not drained, holding at least its floor share (``view().ready``).

        Raises:
            GroupError: What keeps it from ever being ready (a duplicate replica id).
        """
        await self._core.ready()

    @property
    def is_running(self) -> bool:
        """Whether the replica runs (started, not shut down, not failed)."""
        return self._core.is_running

    def admin(self) -> GroupAdmin:
        """A :class:`GroupAdmin` of this group (its own connections)."""
        return GroupAdmin._of(self._core.admin())

    def owns(self, partition: str) -> int | None:
        """The fence of this replica's running term of ``partition`` if it owns it
        now, else ``None`` (also before it starts and after it leaves): a request
        handler's "is it still mine?" before it serves. A map lookup in Rust, no I/O,
        no await: cheap enough for every request. ``None`` as soon as the term ends
        locally (deadline passed, hand-over begun), even before its handler has
        returned.

        A client's route (:class:`Router`) is a hint; this is the truth for this
        replica. Pass the fence on with the work (:class:`FencedWriter`) so that a
        write of a term that ends meanwhile is refused instead of landing::

            fence = coordinator.owns(tenant)
            if fence is None:
                coordinator.misrouted(tenant)
                return redirect_to(router.owner(tenant))   # 421 + the owner's address
            return await serve(tenant, fence)
        """
        return self._core.owns(partition)

    def misrouted(self, partition: str) -> None:
        """Counts a request for ``partition`` that reached this replica although it
        does not own it (the ``leasehold_partition_misrouted_requests_total`` counter
        of the Rust core's metrics), for a handler that answers it with a redirect. A
        few during moves are expected: a client's route lags a move by the time its
        notice takes to arrive."""
        self._core.misrouted(partition)

    def router(self) -> Router:
        """A :class:`Router` of this group on this coordinator's connections (its
        pub/sub link is shared): where each partition is served."""
        return Router._of(self._core.router())

    async def __aenter__(self) -> Coordinator:
        return self

    def __repr__(self) -> str:
        return f"Coordinator(group={self.group!r}, replica={self.replica!r})"
