"""``FencedWriter``: writes only the current term may make."""

from __future__ import annotations

from ._leasehold import Lease, _FencedWriter


def _fence(fence: int | Lease) -> int:
    return fence.fence if isinstance(fence, Lease) else fence


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
