"""What both modes share: the throwaway Redis, child processes, summaries, output."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import Any, Sequence

IMPLS = ("leasehold", "guide")

REDIS_SERVER_MISSING = (
    "redis-server not found: install Debian's redis-server package "
    "(apt-get install redis-server)"
)


class BenchError(RuntimeError):
    """A run could not be measured (a child died, a timeout, an inconsistency)."""


def progress(message: str) -> None:
    """One line of progress on stderr (stdout carries only the final JSON)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def summary(values: Sequence[float]) -> dict[str, float | None]:
    """``{min, median, max}`` of the measured values (``None`` for none)."""
    if not values:
        return {"min": None, "median": None, "max": None}
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def lease_key(impl: str, duty: str) -> str:
    """The Redis key holding ``duty``'s lease for an implementation."""
    if impl == "leasehold":
        return f"leasehold:{{{duty}}}:lease"
    return f"leader:{duty}"


def duty_keys(impl: str, duty: str) -> list[str]:
    """Every key a run of ``duty`` leaves behind."""
    if impl == "leasehold":
        return [f"leasehold:{{{duty}}}:{k}" for k in ("lease", "fence", "boot")]
    return [f"leader:{duty}", f"leader:{duty}:fence"]


def public_url(url: str) -> str:
    """The URL without its password, fit for a report."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urllib.parse.urlunsplit(parts._replace(netloc=user + host))


def _die_with_parent() -> None:  # runs in the forked child before exec (Linux only)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class ThrowawayRedis:
    """A ``redis-server`` on a free loopback port, no persistence, in a temp dir."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> str:
        exe = shutil.which("redis-server")
        if exe is None:
            raise BenchError(REDIS_SERVER_MISSING)
        import redis

        for _ in range(5):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            self._dir = tempfile.TemporaryDirectory(prefix="leasehold-bench-redis-")
            self.proc = subprocess.Popen(
                [
                    exe,
                    "--port", str(self.port),
                    "--bind", "127.0.0.1",
                    "--save", "",
                    "--appendonly", "no",
                    "--dir", self._dir.name,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
            client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
            deadline = time.monotonic() + timeout
            try:
                while time.monotonic() < deadline and self.proc.poll() is None:
                    try:
                        if client.ping():
                            progress(f"throwaway redis-server on 127.0.0.1:{self.port}")
                            return self.url
                    except redis.RedisError:
                        time.sleep(0.05)
            finally:
                client.close()
            self.stop()  # the port was taken meanwhile, or it never answered: again
        raise BenchError("could not start a throwaway redis-server (it never answered PING)")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


class Child:
    """A ``python -m leasehold.bench _child ...`` process whose stdout is JSON lines.

    Every line read is kept; :meth:`expect` returns the first event of a kind (read
    now or earlier) that no earlier :meth:`expect` returned. Use as ``async with``:
    the process is killed on the way out if it still runs.
    """

    def __init__(self, name: str, args: list[str], program: list[str] | None = None) -> None:
        self.name = name
        self.args = args
        # Another program than this module's hidden `_child` (the Rust replica).
        self.program = program
        self.proc: asyncio.subprocess.Process | None = None
        self.events: list[dict[str, Any]] = []
        self._taken: set[int] = set()
        self._reader: asyncio.Task[None] | None = None
        self._new = asyncio.Event()
        self.eof = False

    async def __aenter__(self) -> Child:
        program = self.program or [sys.executable, "-m", "leasehold.bench", "_child"]
        self.proc = await asyncio.create_subprocess_exec(
            *program, *self.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                try:
                    event = json.loads(line)
                except ValueError:
                    progress(f"{self.name}: {line.decode(errors='replace').rstrip()}")
                    continue
                if isinstance(event, dict):
                    self.events.append(event)
                    self._new.set()
        finally:
            self.eof = True
            self._new.set()

    def latest(self, kind: str) -> dict[str, Any] | None:
        for seen in reversed(self.events):
            if seen.get("event") == kind:
                return dict(seen)
        return None

    async def expect(self, kind: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if i not in self._taken and event.get("event") == kind:
                    self._taken.add(i)
                    return event
            if self.eof:
                raise BenchError(f"{self.name} exited (code {self.returncode}) before {kind!r}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{self.name}: no {kind!r} within {timeout:.1f} s")
            self._new.clear()
            try:
                await asyncio.wait_for(self._new.wait(), left)
            except asyncio.TimeoutError:
                pass

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.terminate()
            except ProcessLookupError:
                pass

    async def wait(self, timeout: float = 10.0) -> int:
        """Waits for the exit (and the last line); kills it after ``timeout``."""
        assert self.proc is not None
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            progress(f"{self.name} did not exit within {timeout:.0f} s: killing it")
            self.kill()
            await self.proc.wait()
        if self._reader is not None:
            await asyncio.wait({self._reader}, timeout=5)
        return self.proc.returncode  # type: ignore[return-value]

    async def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.kill()
        await self.proc.wait()
        if self._reader is not None:
            if not self._reader.done():
                await asyncio.wait({self._reader}, timeout=5)
            if not self._reader.done():
                self._reader.cancel()


async def cancel_until_done(task: asyncio.Task[Any], retry_after: float = 0.5) -> int:
    """Cancels ``task`` and waits for it; cancels again every ``retry_after`` s while
    it runs on. Returns how many cancels it took.

    redis-py's asyncio client can swallow a cancellation that lands while a command
    is in flight (the ``await`` returns the reply; seen with redis 8.2.0), so the
    guide's campaign loop may go on after one ``cancel()``.
    """
    cancels = 0
    while not task.done():
        task.cancel()
        cancels += 1
        await asyncio.wait({task}, timeout=retry_after)
    return cancels


def emit(kind: str, **fields: Any) -> None:
    """One JSON event line on stdout (children)."""
    fields = {"event": kind, **fields}
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def exit_with_parent() -> None:
    """Children: exit once the bench process is gone (even while the loop blocks)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def header(command: str, url: str, redis_version: str, server: ThrowawayRedis | None) -> dict[str, Any]:
    """The report's common top-level keys."""
    import datetime

    import leasehold

    return {
        "command": command,
        # The whole command line that produced the report.
        "argv": " ".join(["python -m leasehold.bench", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "redis_version": redis_version,
        "redis": "throwaway redis-server (127.0.0.1, no persistence)" if server else public_url(url),
        "leasehold_version": leasehold.__version__,
        "python": sys.version.split()[0],
    }


class RustChild(Child):
    """A Rust replica: ``leasehold-bench partition-child``, whose lines are `owned` and
    `released` events; its ``count`` is what they add up to."""

    def latest(self, kind: str) -> dict[str, Any] | None:
        if kind == "stopped":
            return super().latest("stopped")
        if kind != "count":
            return super().latest(kind)
        owned: set[str] = set()
        terms = 0
        for event in self.events:
            if event.get("event") == "owned":
                owned.add(event["partition"])
                terms += 1
            elif event.get("event") == "released":
                owned.discard(event["partition"])
        return {"event": "count", "owned": len(owned), "terms": terms}
