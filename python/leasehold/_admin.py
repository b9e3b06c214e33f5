"""``GroupAdmin``: a group's set, drains, weights, preferences, status and moves."""

from __future__ import annotations

import builtins
from typing import Iterable

from ._leasehold import _GroupAdmin
from ._router import Router
from .types import GroupStatus, Move, PartitionOwner


class GroupAdmin:
    """Administers a partition group from anywhere (a replica, a script, a job).

    Every method is a coroutine and raises :class:`~leasehold.StoreError` when Redis
    cannot be reached in time or answers with an error, :class:`~leasehold.GroupError` when the group refuses
    (no such group, a partition already present, ...) and
    :class:`~leasehold.ConfigError` for a bad name.

    Example::

        admin = GroupAdmin("redis://127.0.0.1:6379/", "tenants")
        await admin.add(["tenant-33"])
        await admin.drain("replica-b")      # before maintenance
        status = await admin.status()
        for move in await admin.moves(limit=10):
            print(move.partition, move.from_, "->", move.to, move.cause)
    """

    def __init__(self, url: str, group: str, *, key_prefix: str | None = None) -> None:
        self._core = _GroupAdmin(url, group, key_prefix=key_prefix)

    @classmethod
    def _of(cls, core: _GroupAdmin) -> GroupAdmin:
        admin = cls.__new__(cls)
        admin._core = core
        return admin

    def router(self) -> Router:
        """A :class:`Router` of this group on this admin's connections."""
        return Router._of(self._core.router())

    async def add(self, partitions: Iterable[str]) -> int:
        """Adds partitions to the group's set; returns how many were new."""
        return await self._core.add(_names(partitions))

    async def remove(self, partitions: Iterable[str]) -> int:
        """Removes partitions from the set (their owners stop them); returns how many
        were removed."""
        return await self._core.remove(_names(partitions))

    async def list(self) -> list[str]:
        """The group's partition set."""
        return await self._core.list()

    async def drain(self, replica: str) -> None:
        """Drains a replica: it hands its partitions over and claims nothing until
        :meth:`undrain`."""
        await self._core.drain(replica)

    async def undrain(self, replica: str) -> None:
        """Lets a drained replica claim again."""
        await self._core.undrain(replica)

    async def set_weight(self, partition: str, weight: int) -> int:
        """Sets a partition's weight (1 to 1,000,000); returns the previous one."""
        return await self._core.set_weight(partition, weight)

    weight = set_weight

    async def prefer(self, partition: str, replica: str) -> str | None:
        """Prefers a partition on a replica (kept there, moved back when it
        returns); returns the previous preference."""
        return await self._core.prefer(partition, replica)

    async def unprefer(self, partition: str) -> str | None:
        """Removes a partition's preference; returns it."""
        return await self._core.unprefer(partition)

    async def owner(self, partition: str) -> PartitionOwner:
        """A partition's owner: its ``owner`` (a replica id, or ``None``), ``fence``,
        ``remaining`` and ``held_for`` (float seconds) and ``weight``."""
        return PartitionOwner._of(await self._core.owner(partition))

    async def status(self) -> GroupStatus | None:
        """The whole group: every partition's owner, every replica's state, count
        and load; ``None`` if no replica ever created the group. Each of
        ``members`` (:class:`~leasehold.ReplicaStatus`) has the replica's
        ``instance`` (``host pid``) and ``address`` (what it advertises:
        ``Coordinator(advertise=...)``, or ``None``)."""
        raw = await self._core.status()
        return None if raw is None else GroupStatus._of(raw)

    async def moves(self, after: str | None = None, limit: int = 100) -> builtins.list[Move]:
        """Moves from the group's ledger, oldest first, after the move id ``after``:
        ``partition``, ``from_``, ``to``, ``cause`` (:class:`~leasehold.MoveCause`),
        both fences, the gap without an owner."""
        return [Move._of(raw) for raw in await self._core.moves(after, limit)]

    async def newest_moves(self, limit: int = 100) -> builtins.list[Move]:
        """The newest ``limit`` moves of the group's ledger, oldest first (as
        :meth:`moves`): where a view of the recent past starts, without reading the
        whole ledger; go on with ``moves(after=newest[-1].id)``."""
        return [Move._of(raw) for raw in await self._core.newest_moves(limit)]


def _names(partitions: Iterable[str]) -> list[str]:
    if isinstance(partitions, (str, bytes)):
        from .errors import ConfigError

        raise ConfigError("give a list of partition names, not one string")
    return list(partitions)
