"""Running one term's duty or handler as an asyncio task."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from ._leasehold import Lease
from .errors import TermOver

log = logging.getLogger("leasehold")


async def run_term(lease: Lease, start: Callable[[], Awaitable[Any]], what: str) -> bool:
    """Runs ``start()`` as a task until it returns or the term is over.

    When ``lease.lost()`` completes first, the task is cancelled (asyncio
    cancellation) and awaited. The Rust side then hears how the term ended: an
    exception other than the cancellation or :class:`TermOver` ends it as failed (logged here, counted,
    the lease released, a backoff before the next campaign), anything else as
    returned. Returns whether the duty failed.
    """
    failure: str | None = None
    try:
        duty = asyncio.ensure_future(start())
    except Exception as exc:  # the callable itself raised before returning an awaitable
        log.exception("%s failed to start (fence %d)", what, lease.fence)
        lease._finish(f"{type(exc).__name__}: {exc}")
        return True
    lost = asyncio.ensure_future(lease.lost())
    try:
        await asyncio.wait({duty, lost}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        try:
            if not duty.done():
                duty.cancel()
            # Never raises the duty's exception; a cancellation of this task still
            # propagates (and the lease is finished below all the same).
            await asyncio.wait({duty})
            error = None if duty.cancelled() else duty.exception()
            if isinstance(error, TermOver):
                # `lease.check()` saw the term over: the way a duty is meant to stop.
                log.debug("%s stopped: %s", what, error)
            elif error is not None:
                log.error(
                    "%s failed (fence %d): %s: %s",
                    what,
                    lease.fence,
                    type(error).__name__,
                    error,
                    exc_info=error,
                )
                failure = f"{type(error).__name__}: {error}"
        finally:
            lost.cancel()
            lease._finish(failure)
    return failure is not None
