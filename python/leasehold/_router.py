"""``Router``: which replica owns each partition of a group, and where it serves."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ._leasehold import Route, _RouteChanges, _Router

log = logging.getLogger("leasehold")


@dataclass(frozen=True)
class RouteChange:
    """A change of a router's table (:meth:`Router.changes`)."""

    partition: str
    route: Route | None
    """The partition's new route; ``None``: no owner is known now (it was freed and
    not yet claimed, or the group was lost)."""


@dataclass(frozen=True)
class RouterStatus:
    """How a router stands (:meth:`Router.status`). A snapshot."""

    ready: bool
    """The table holds a full read of the group (and every move since that the
    router has heard of or read)."""
    group_exists: bool
    """The group exists, as the last read found it."""
    incarnation: str | None
    """The incarnation of the group the table is of (``None``: not read yet, or no
    such group)."""
    last_move: str | None
    """The id of the last ledger entry applied."""
    routes: int
    """Partitions with a known owner."""
    full_reads: int
    """Full reads of the table so far."""
    catch_ups: int
    """Reads of missed ledger entries so far."""
    notices: int
    """Move notices applied so far."""

    @classmethod
    def _of(cls, raw: dict[str, Any]) -> RouterStatus:
        return cls(**raw)


class RouteChanges:
    """An async iterator of a router's changes from the moment it was made
    (:meth:`Router.changes`); it ends when the router shuts down."""

    def __init__(self, core: _RouteChanges) -> None:
        self._core = core
        self.skipped = 0
        """Changes this iterator skipped because it fell more than 4,096 behind (read
        :meth:`Router.routes` again when it grows)."""

    def __aiter__(self) -> RouteChanges:
        return self

    async def __anext__(self) -> RouteChange:
        while True:
            item = await self._core.next()
            if item is None:
                raise StopAsyncIteration
            if isinstance(item, int):
                self.skipped += item
                log.warning(
                    "a router's change iterator fell behind and skipped %d changes: "
                    "read Router.routes() again",
                    item,
                )
                continue
            partition, route = item
            return RouteChange(partition, route)


class Router:
    """The owners of a group's partitions, and their addresses, for processes that
    are not members of the group (a gateway, another service): kept current by the
    group's move notices (pushed, never polled).

    :meth:`owner` is a local lookup (no I/O, no await): call it on every request. A
    route is a hint: the owner checks with :meth:`Coordinator.owns` and answers a
    request for a partition it no longer owns with a redirect. The router has its own
    Redis connections (its pub/sub link is checked once a minute: a router keeps no
    lease) and its own background task on the Rust core.

    Args:
        url: The Redis URL.
        group: The group's name.
        key_prefix: Prefix of every Redis key (default ``leasehold``; the replicas').

    Raises:
        ConfigError: A bad URL, group name or key prefix.

    Example::

        async with Router(url, "tenants") as router:
            await router.ready(timeout=5.0)
            route = router.owner("tenant-7")
            if route is not None:
                print(route.replica, route.address, route.fence)
    """

    def __init__(self, url: str, group: str, *, key_prefix: str | None = None) -> None:
        self._core = _Router(url, group, key_prefix=key_prefix)

    @classmethod
    def _of(cls, core: _Router) -> Router:
        router = cls.__new__(cls)
        router._core = core
        return router

    @property
    def group(self) -> str:
        """The group's name."""
        return self._core.group

    def owner(self, partition: str) -> Route | None:
        """The route of ``partition`` (its owner, the owner's address and its term's
        fence), or ``None`` if no owner is known: none now, the table not read yet,
        or the group lost. A map read in Rust: no I/O, no await."""
        return self._core.owner(partition)

    def routes(self) -> dict[str, Route]:
        """Every known route, by partition."""
        return self._core.routes()

    async def ready(self, timeout: float | None = None) -> None:
        """Waits until the table holds a full read of the group (returns at once if
        it does). Without a timeout it waits on while Redis cannot be reached or the
        group does not exist.

        Raises:
            Timeout: ``timeout`` seconds passed first (the message says why).
            Stopped: The router was shut down first.
            ConfigError: A negative or not finite ``timeout``.
        """
        await self._core.ready(timeout)

    def status(self) -> RouterStatus:
        """How the router stands now: whether its table is read, of which
        incarnation of the group, how many reads and notices so far."""
        return RouterStatus._of(self._core.status())

    def changes(self) -> RouteChanges:
        """Every change of the table from now on (this call), until the router shuts
        down::

            async for change in router.changes():
                print(change.partition, "->", change.route)
        """
        return RouteChanges(self._core.changes())

    async def shutdown(self) -> None:
        """Stops following the group; every :meth:`changes` iterator ends. Idempotent.
        Dropping the router stops it too, without waiting."""
        await self._core.shutdown()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def __repr__(self) -> str:
        return f"Router(group={self.group!r})"
