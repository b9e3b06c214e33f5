"""What ``Elector`` and ``Coordinator`` share: starting the Rust side once, a
background task, and ``async with`` that shuts down on the way out."""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine

from .errors import Stopped


class Runner:
    """Base of :class:`~leasehold.Elector` and :class:`~leasehold.Coordinator`."""

    _core: Any

    def _init_runner(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._started = False
        self.terms = 0
        """Terms this replica has held."""
        self.failures = 0
        """Terms whose duty or handler raised."""

    def _start_core(self) -> None:
        """Starts the Rust side, once (a second time raises :class:`Stopped`)."""
        if not self._started:
            self._core.start()
            self._started = True

    def _start_task(self, run: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
        if self._task is not None:
            run.close()
            raise Stopped(f"{what} was already started")
        try:
            self._start_core()
        except BaseException:
            run.close()
            raise
        self._task = asyncio.ensure_future(run)
        return self._task

    async def shutdown(self) -> None:
        """Stops and returns when it has (see the class). Idempotent."""
        await self._leave()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})

    async def _leave(self) -> None:
        await self._core.shutdown()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()
