"""The design guide's leader election, as written: kept as the benchmark's baseline.

This is the ``Elector`` and ``lead_partitions`` of the design guide "Leader Election
for asyncio Workers" (sections 1, 2 and 5) that leasehold grew from, on redis-py's
asyncio client (``redis.asyncio.Redis``), with the guide's logic unchanged:

- campaign: ``SET key token NX PX ttl``, then ``INCR key:fence``; a loser sleeps
  ``ttl / 3`` and tries again (followers poll at a third of the lease);
- lead: the duty and a renew task run side by side on the event loop; the renew task
  sleeps ``ttl / 3`` and extends with a compare-and-``PEXPIRE`` script; whichever ends
  first cancels the other; ``finally`` releases with a compare-and-``DEL`` script;
- partitions: one elector per partition, every replica campaigns for every
  partition, no cap and no jitter.

Do not "fix" it here: the benchmark measures it as published. The only changes:

- ``_lead`` is shown separately in the guide; here it is the method it belongs to.
- ``lead(fence)``: the guide hands the duty ``self.fence`` (an ``int``), not a lease
  object; the benchmark's duties take that.
- ``lead_partitions`` takes ``ttl_ms`` (the guide hard-codes ``10_000``, still the
  default) and ``namespace`` (the guide's ``"partition"``, still the default), so a
  benchmark run can set the lease and keep its keys apart from other runs'.
- On Python 3.10 (no ``asyncio.TaskGroup``) ``lead_partitions`` gathers the tasks.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Coroutine
import uuid

log = logging.getLogger("election")

EXTEND = ("if redis.call('get',KEYS[1])==ARGV[1] then "
          "return redis.call('pexpire',KEYS[1],ARGV[2]) else return 0 end")
RELEASE = ("if redis.call('get',KEYS[1])==ARGV[1] then "
           "return redis.call('del',KEYS[1]) else return 0 end")


class Elector:
    def __init__(self, r: Any, duty: str, ttl_ms: int = 5000, replica: str = "") -> None:
        self.r, self.key, self.ttl = r, f"leader:{duty}", ttl_ms
        self.replica = replica or str(uuid.uuid4())[:8]
        self.token: str | None = None
        self.fence: int | None = None
        self.is_leader = False

    async def _try_acquire(self) -> bool:
        token = f"{self.replica}:{uuid.uuid4()}"
        if await self.r.set(self.key, token, nx=True, px=self.ttl):
            self.token = token
            self.fence = await self.r.incr(self.key + ":fence")
            return True
        return False

    async def campaign(self, lead: Callable[[int], Coroutine[Any, Any, None]]) -> None:
        while True:
            try:
                if await self._try_acquire():
                    await self._lead(lead)            # returns when leadership ends
            except Exception:
                log.exception("election error")
            await asyncio.sleep(self.ttl / 1000 / 3)

    async def _lead(self, lead: Callable[[int], Coroutine[Any, Any, None]]) -> None:
        self.is_leader = True
        log.info("%s became leader (fence %d)", self.replica, self.fence)

        async def renew() -> None:
            while True:
                await asyncio.sleep(self.ttl / 1000 / 3)
                if not await self.r.eval(EXTEND, 1, self.key, self.token, self.ttl):
                    log.error("%s lost leadership", self.replica)
                    return

        try:
            renewer = asyncio.create_task(renew())
            assert self.fence is not None
            duty = asyncio.create_task(lead(self.fence))
            await asyncio.wait({renewer, duty}, return_when=asyncio.FIRST_COMPLETED)
            for t in (renewer, duty):
                t.cancel()
            await asyncio.gather(renewer, duty, return_exceptions=True)
        finally:
            self.is_leader = False
            await self.r.eval(RELEASE, 1, self.key, self.token)   # hand over quickly if still ours


async def lead_partitions(r: Any, partitions: list[str], replica: str,
                          handle: Callable[[str, int], Coroutine[Any, Any, None]],
                          ttl_ms: int = 10_000, namespace: str = "partition") -> None:
    electors = [Elector(r, f"{namespace}:{p}", ttl_ms=ttl_ms, replica=replica) for p in partitions]
    if not hasattr(asyncio, "TaskGroup"):  # Python 3.10
        await asyncio.gather(*(e.campaign(_for(handle, p))
                               for e, p in zip(electors, partitions)))
        return
    async with asyncio.TaskGroup() as tg:
        for e, p in zip(electors, partitions):
            tg.create_task(e.campaign(_for(handle, p)))


def _for(handle: Callable[[str, int], Coroutine[Any, Any, None]],
         partition: str) -> Callable[[int], Coroutine[Any, Any, None]]:
    """`handle` for one partition (the guide's `lambda fence, p=p: handle(p, fence)`)."""
    def lead(fence: int) -> Coroutine[Any, Any, None]:
        return handle(partition, fence)
    return lead
