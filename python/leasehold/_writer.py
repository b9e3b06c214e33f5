"""``FencedWriter`` and ``FencedBatch``: writes only the current term may make."""

from __future__ import annotations

from ._leasehold import Lease, _FencedBatch, _FencedWriter
from .errors import ConfigError


def _fence(fence: int | Lease) -> int:
    if isinstance(fence, Lease):
        return fence.fence
    if isinstance(fence, bool) or not isinstance(fence, int) or not 0 <= fence < 2**64:
        raise ConfigError(f"a fence is a Lease or an int from 0 to 2**64 - 1, not {fence!r}")
    return fence


class FencedWriter:
    """Writes to Redis keys, each carrying a term's fence.

    A key accepts a write only if its fence is not below the highest the key has
    accepted, so a deposed owner that resumes after a pause cannot overwrite the new
    owner's work: its write raises :class:`~leasehold.FenceRejected`. Pass the
    ``Lease`` (or its ``fence``).

    Example::

        writer = FencedWriter("redis://127.0.0.1:6379/")

        async def lead(lease):
            await writer.set("scheduler:last-run", "now", lease)
    """

    def __init__(self, url: str) -> None:
        self._core = _FencedWriter(url)

    async def set(self, key: str, value: str, fence: int | Lease) -> None:
        """``SET key value``, fenced."""
        await self._core.set(key, value, _fence(fence))

    async def hset(self, key: str, field: str, value: str, fence: int | Lease) -> None:
        """``HSET key field value``, fenced."""
        await self._core.hset(key, field, value, _fence(fence))

    async def rpush(self, key: str, value: str, fence: int | Lease) -> None:
        """``RPUSH key value``, fenced: append to a ledger."""
        await self._core.rpush(key, value, _fence(fence))

    async def raise_fence(self, key: str, fence: int | Lease) -> None:
        """Raises the key's fence without writing: older terms are refused from now."""
        await self._core.raise_fence(key, _fence(fence))

    def batch(self) -> FencedBatch:
        """A batch of fenced writes to several keys, made all or none by one
        :meth:`FencedBatch.commit` (``FencedWriter::batch`` of the Rust core)::

            await (
                writer.batch()
                .rpush("out:{tenant-07}", entry_id)
                .set("cursor:{tenant-07}", entry_id)
                .commit(lease)
            )
        """
        return FencedBatch(self._core.batch())


class FencedBatch:
    """Fenced writes to several keys that one script makes all or none of.

    An owner appends its output and moves its cursor together, so no crash, pause or
    deposition leaves one without the other. Made by :meth:`FencedWriter.batch`; each
    method adds an operation and returns the batch, so calls chain; nothing is sent
    before :meth:`commit`.

    On commit the script reads every key's fence first: if any holds a higher one,
    nothing is written and :class:`~leasehold.FenceRejected` is raised. Otherwise it
    makes the writes in the order they were added and raises every key's fence to the
    batch's. A key of the wrong type (``RPUSH`` to a string) fails the whole batch,
    with nothing written.

    **Keys**: one script touches the keys of one Redis Cluster slot only, so give every
    key of a batch the same hash tag: ``out:{tenant-07}`` and ``cursor:{tenant-07}``,
    not ``out:tenant-07`` and ``cursor:tenant-07``. A batch whose keys span slots is
    refused before it is sent, on every topology (:class:`~leasehold.ConfigError`).

    Keys, fields and values are ``str`` (or ``bytes`` holding UTF-8); anything else
    raises :class:`~leasehold.ConfigError` when it is added.
    """

    def __init__(self, core: _FencedBatch) -> None:
        self._core = core

    def set(self, key: str, value: str | bytes) -> FencedBatch:
        """Adds ``SET key value``."""
        self._core.set(key, value)
        return self

    def hset(self, key: str, field: str | bytes, value: str | bytes) -> FencedBatch:
        """Adds ``HSET key field value``."""
        self._core.hset(key, field, value)
        return self

    def rpush(self, key: str, value: str | bytes) -> FencedBatch:
        """Adds ``RPUSH key value``. A batch holding one is never sent twice: if the
        connection breaks after the request went out, :meth:`commit` raises
        :class:`~leasehold.StoreError` and the batch may or may not have been written
        (committing it again could append twice)."""
        self._core.rpush(key, value)
        return self

    def raise_fence(self, key: str) -> FencedBatch:
        """Adds a raise of ``key``'s fence to the batch's fence, without writing
        ``key`` (:meth:`FencedWriter.raise_fence`, for several keys in one call)."""
        self._core.raise_fence(key)
        return self

    def __len__(self) -> int:
        """How many operations the batch holds."""
        return len(self._core)

    async def commit(self, fence: int | Lease) -> None:
        """Makes every write of the batch with ``fence`` (a ``Lease`` or its
        ``fence``), or none of them, and raises every key's fence to it. An equal
        fence is accepted, so one term may commit many batches. The batch is kept: it
        may be committed again (writing the same again).

        Cancelling the call may leave the batch written or not, but never in part.

        Raises:
            FenceRejected: A key has seen a higher fence (a newer term wrote or raised
                it): nothing was written; the caller is deposed.
            ConfigError: An empty batch, an empty key, or keys in different Redis
                Cluster slots: nothing was sent.
            StoreError: Redis failed or could not be reached (a key of the wrong
                type: nothing was written).
        """
        await self._core.commit(_fence(fence))

    def __repr__(self) -> str:
        return f"FencedBatch({len(self)} operations)"
