"""``side-by-side``: one duty, leasehold's elector beside the guide's.

Each run has a leader in a child process (a fresh duty name per run) and a follower
campaigning in this process. Three cases:

- overshoot (SIGKILL): after the kill and the child's reap, ``PTTL`` of the lease key
  (read three times, see :meth:`SideBySide._real_expiry`) gives the lease's real
  expiry on ``time.monotonic``; the overshoot is the follower's ``lead()`` start
  minus that expiry.
- handover (SIGTERM): the child prints the wall time its handler starts stepping
  down; the hand-over is the follower's ``lead()`` start (wall time) minus that.
- blocked loop: the child's duty blocks its event loop for three leases, then says
  whether it still holds the lease; the run ends (SIGTERM) one lease after that. The
  lease counts as kept if it was and the follower did not lead during the block; an
  overlap is a follower ``lead()`` start before the blocked duty stopped.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from typing import Any

from ..types import Role
from ._util import (
    IMPLS,
    BenchError,
    Child,
    cancel_until_done,
    duty_keys,
    lease_key,
    progress,
    summary,
)

Result = dict[str, Any]


class Follower:
    """A follower elector in this process, for one duty; records when it leads."""

    def __init__(self, impl: str, url: str, duty: str, lease_ms: int) -> None:
        self.impl, self.url, self.duty, self.lease_ms = impl, url, duty, lease_ms
        self.replica = f"bench-follower-{secrets.token_hex(3)}"
        self.led = asyncio.Event()
        self.led_mono: float | None = None
        self.led_wall: float | None = None
        self.fence: int | None = None
        self.orphans = 0
        self.cancels = 0
        self._elector: Any = None
        self._task: asyncio.Task[None] | None = None
        self._duty: asyncio.Task[Any] | None = None
        self._redis: Any = None

    def _record(self, fence: int) -> None:
        if self.led_mono is None:
            self.led_mono = time.monotonic()
            self.led_wall = time.time()
            self.fence = fence
            self.led.set()

    async def start(self) -> None:
        if self.impl == "leasehold":
            import leasehold

            self._elector = leasehold.Elector(
                self.url, self.duty, replica=self.replica, lease=self.lease_ms / 1000
            )

            async def lead_lease(lease: leasehold.Lease) -> None:
                self._record(lease.fence)
                await lease.lost()

            self._task = self._elector.start(lead_lease)
        else:
            import redis.asyncio

            from . import guide

            self._redis = redis.asyncio.Redis.from_url(self.url)
            self._elector = guide.Elector(self._redis, self.duty, self.lease_ms, self.replica)

            async def lead_fence(fence: int) -> None:
                self._record(fence)
                self._duty = asyncio.current_task()
                await asyncio.Event().wait()

            self._task = asyncio.ensure_future(self._elector.campaign(lead_fence))

    async def shutdown(self) -> None:
        """Stops the follower; checks that it did (and, for the guide, cancels what
        cancelling its campaign leaves running: the duty and the renew task)."""
        if self._task is None:
            return
        if self.impl == "leasehold":
            await self._elector.shutdown()
            role = self._elector.status().role
            if not self._task.done() or role is not Role.STOPPED:
                raise BenchError(f"the leasehold follower did not stop (role {role!r})")
        else:
            self.cancels = await cancel_until_done(self._task)
            leftovers = [
                t
                for t in asyncio.all_tasks()
                if not t.done() and (t is self._duty or _renewer_of(t, self._elector))
            ]
            self.orphans = len(leftovers)
            await asyncio.gather(*(cancel_until_done(t) for t in leftovers))
            await self._redis.aclose()
        self._task = None


def _renewer_of(task: asyncio.Task[Any], elector: Any) -> bool:
    coro = task.get_coro()
    frame = getattr(coro, "cr_frame", None)
    return (
        getattr(coro, "__qualname__", "") == "Elector._lead.<locals>.renew"
        and frame is not None
        and frame.f_locals.get("self") is elector
    )


class SideBySide:
    def __init__(self, url: str, lease_ms: int, runs: int, blocked_runs: int) -> None:
        import redis.asyncio

        self.url = url
        self.lease_ms = lease_ms
        self.lease_s = lease_ms / 1000
        self.runs = runs
        self.blocked_runs = blocked_runs
        self.redis = redis.asyncio.Redis.from_url(url, decode_responses=True)
        self.suffix = secrets.token_hex(3)
        self.lead_timeout = 15 + 3 * self.lease_s
        self.orphans = {impl: 0 for impl in IMPLS}

    def _child(self, impl: str, duty: str, mode: str) -> Child:
        return Child(
            f"{impl} leader ({mode})",
            [
                "leader", "--impl", impl, "--url", self.url, "--duty", duty,
                "--replica", f"bench-leader-{secrets.token_hex(3)}",
                "--lease-ms", str(self.lease_ms), "--mode", mode,
            ],
        )

    def _duty(self, case: str, impl: str, run: int) -> str:
        return f"bench-{case}-{impl}-{run}-{self.suffix}"

    async def _cleanup(self, impl: str, duty: str) -> None:
        try:
            await self.redis.delete(*duty_keys(impl, duty))
        except Exception as exc:  # only tidiness: the names are never reused
            progress(f"could not delete the keys of {duty}: {exc}")

    async def _start_follower(self, follower: Follower) -> None:
        """Starts the follower at a random point of a third of a lease after the
        child's ``leading`` line. The guide's follower polls every ttl/3 and its
        leader renews every ttl/3: started right after the leader, the follower
        polls just after every instant the lease could expire (the two grids stay
        locked), and its overshoot would always be a few ms instead of anything up to
        one poll interval, as for followers started independently of the leader."""
        await asyncio.sleep(random.uniform(0, self.lease_s / 3))
        await follower.start()

    async def _ensure_follows(self, follower: Follower, child: Child) -> float:
        """Gives the follower about a third of a lease to campaign (and lose): a third
        plus a random part of another third, so the kill or the SIGTERM lands at a
        random point of the leader's renew cycle and of the guide follower's poll
        cycle (both a third of a lease; a fixed delay would lock their phases and
        report one point of each cycle). Returns the delay (ms)."""
        delay = self.lease_s / 3 * (1 + random.random())
        await asyncio.sleep(delay)
        if follower.led.is_set():
            raise BenchError("the follower led while the child still led")
        if child.returncode is not None:
            raise BenchError(f"{child.name} exited early (code {child.returncode})")
        return round(delay * 1000, 3)

    # --- overshoot --------------------------------------------------------------------

    async def overshoot(self, impl: str, run: int) -> Result:
        duty = self._duty("kill", impl, run)
        key = lease_key(impl, duty)
        follower = Follower(impl, self.url, duty, self.lease_ms)
        try:
            async with self._child(impl, duty, "kill") as child:
                leading = await child.expect("leading", self.lead_timeout)
                await self._start_follower(follower)
                delay = await self._ensure_follows(follower, child)
                child.kill()  # SIGKILL: no release, no cleanup
                await child.wait()
                # The dead child's last renewal (if one was under way) has reached
                # Redis by now; read the lease's real expiry.
                expiry, uncertainty, pttl = await self._real_expiry(impl, key)
            await asyncio.wait_for(follower.led.wait(), 5 + 3 * self.lease_s)
            if follower.fence is not None and follower.fence <= leading["fence"]:
                raise BenchError(f"fence did not grow: {leading['fence']} -> {follower.fence}")
            assert follower.led_mono is not None
            return {
                "overshoot_ms": (follower.led_mono - expiry) * 1000,
                "pttl_at_kill_ms": pttl,
                "expiry_uncertainty_ms": round(uncertainty * 1000, 3),
                "kill_after_ms": delay,
            }
        finally:
            await follower.shutdown()
            self.orphans[impl] += follower.orphans
            await self._cleanup(impl, duty)

    async def _real_expiry(self, impl: str, key: str, reads: int = 3) -> tuple[float, float, int]:
        """When the lease key expires, on this process's ``time.monotonic()``: the
        estimate, its uncertainty (half the interval) and the first PTTL read.

        A read sent at ``before`` and answered at ``after`` says that the key
        expires (is gone for a ``SET NX``) within ``[before + pttl, after + pttl +
        1 ms]`` (Redis counts whole milliseconds and expires a key once its clock is
        past the expiry). A few reads are intersected, which keeps the interval
        tight even when one reply was slow (a busy machine). Should the intervals
        not meet, the lease moved after the kill (a renewal still in flight): the
        last read counts.
        """
        low, high = float("-inf"), float("inf")
        first: int | None = None
        for i in range(reads):
            if i:
                await asyncio.sleep(0.002)
            before = time.monotonic()
            pttl = await self.redis.pttl(key)
            after = time.monotonic()
            if pttl < 0:
                if first is None:
                    raise BenchError(f"PTTL {key} = {pttl} right after the kill")
                break  # expired meanwhile (a tiny lease): what was read holds
            if first is None:
                first = pttl
            lo, hi = before + pttl / 1000, after + (pttl + 1) / 1000
            if lo > high:
                progress(f"{impl}: the lease moved after the kill's reap (PTTL {first} then {pttl})")
                low, high = lo, hi
            elif hi >= low:
                low, high = max(low, lo), min(high, hi)
        assert first is not None
        return (low + high) / 2, (high - low) / 2, first

    # --- handover ---------------------------------------------------------------------

    async def handover(self, impl: str, run: int) -> Result:
        duty = self._duty("term", impl, run)
        follower = Follower(impl, self.url, duty, self.lease_ms)
        try:
            async with self._child(impl, duty, "term") as child:
                await child.expect("leading", self.lead_timeout)
                await self._start_follower(follower)
                delay = await self._ensure_follows(follower, child)
                child.terminate()
                stepping = await child.expect("stepping_down", 10)
                await asyncio.wait_for(follower.led.wait(), 5 + 3 * self.lease_s)
                stopped = await child.expect("stopped", 10 + 2 * self.lease_s)
                code = await child.wait()
            assert follower.led_wall is not None
            return {
                "handover_ms": (follower.led_wall - stepping["t"]) * 1000,
                "duty_outlived_release": stopped.get("duty_done") is False,
                "child_exit_code": code,
                "sigterm_after_ms": delay,
            }
        finally:
            await follower.shutdown()
            self.orphans[impl] += follower.orphans
            await self._cleanup(impl, duty)

    # --- blocked loop -----------------------------------------------------------------

    async def blocked(self, impl: str, run: int) -> Result:
        duty = self._duty("block", impl, run)
        follower = Follower(impl, self.url, duty, self.lease_ms)
        try:
            async with self._child(impl, duty, "block") as child:
                leading = await child.expect("leading", self.lead_timeout)
                await follower.start()
                resumed = await child.expect("resumed", 10 + 4 * self.lease_s)
                # One more lease for whatever the resumed leader does on its own
                # (the guide's renew task runs late, fails and cancels the duty).
                await asyncio.sleep(self.lease_s)
                end_of_run = time.time()
                child.terminate()
                ended = await child.expect("duty_ended", 10 + 2 * self.lease_s)
                await child.expect("stopped", 10 + 2 * self.lease_s)
                code = await child.wait()
            # After the step-down the follower should lead (only a check that it
            # can; it does not count).
            try:
                await asyncio.wait_for(follower.led.wait(), 5 + 3 * self.lease_s)
            except asyncio.TimeoutError:
                progress(f"{impl}: the follower did not lead after the blocked leader stepped down")
            led = follower.led_wall
            duty_stopped = ended["t"]
            during_block = led is not None and led < resumed["t"]
            return {
                "kept_on_resume": bool(resumed["kept"]),
                "follower_led_during_block": during_block,
                "lease_kept": bool(resumed["kept"]) and not during_block,
                "overlap": led is not None and led < duty_stopped,
                "overlap_ms": round((duty_stopped - led) * 1000, 3)
                if led is not None and led < duty_stopped
                else 0.0,
                "duty_stopped_before_end_of_run": duty_stopped < end_of_run,
                "follower_led_after_block_start_ms": None
                if led is None
                else round((led - leading["t"]) * 1000, 3),
                "resumed": {k: v for k, v in resumed.items() if k != "event"},
                "child_exit_code": code,
            }
        finally:
            await follower.shutdown()
            self.orphans[impl] += follower.orphans
            await self._cleanup(impl, duty)

    # --- the whole ---------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        samples: dict[str, dict[str, list[Any]]] = {
            impl: {"overshoot": [], "handover": [], "blocked": []} for impl in IMPLS
        }
        cases = (
            ("overshoot", self.runs, self.overshoot),
            ("handover", self.runs, self.handover),
            ("blocked", self.blocked_runs, self.blocked),
        )
        for case, runs, one in cases:
            for run in range(runs):
                # Alternate which goes first, so neither always runs right after the
                # other's clean-up.
                order = IMPLS if run % 2 == 0 else tuple(reversed(IMPLS))
                for impl in order:
                    result = await one(impl, run)
                    samples[impl][case].append(result)
                    progress(f"{case} {run + 1}/{runs} {impl}: {_brief(case, result)}")
        await self.redis.aclose()
        return {impl: self._report(impl, samples[impl]) for impl in IMPLS}

    def _report(self, impl: str, s: dict[str, list[Any]]) -> dict[str, Any]:
        overshoot = [r["overshoot_ms"] for r in s["overshoot"]]
        handover = [r["handover_ms"] for r in s["handover"]]
        blocked = s["blocked"]
        report: dict[str, Any] = {
            "overshoot_ms": summary(overshoot),
            "handover_ms": summary(handover),
            "blocked_loop": {
                "lease_kept": bool(blocked) and all(r["lease_kept"] for r in blocked),
                "overlaps": sum(1 for r in blocked if r["overlap"]),
                "runs": blocked,
            },
            "samples": {
                "overshoot_ms": [round(v, 3) for v in overshoot],
                "pttl_at_kill_ms": [r["pttl_at_kill_ms"] for r in s["overshoot"]],
                "expiry_uncertainty_ms": [r["expiry_uncertainty_ms"] for r in s["overshoot"]],
                "handover_ms": [round(v, 3) for v in handover],
            },
            # Children that stepped down (SIGTERM) and then exited other than with 0:
            # a crash on the way out (their measurements stand: taken before).
            "leader_exit_failures": [
                r["child_exit_code"] for r in s["handover"] + blocked if r["child_exit_code"] != 0
            ],
            "handover_duty_outlived_release": sum(
                1 for r in s["handover"] if r["duty_outlived_release"]
            ),
        }
        if impl == "guide":
            # Cancelling the guide's campaign while it leads releases the lease in
            # `_lead`'s finally but leaves its duty and renew task running.
            report["follower_tasks_left_running_after_cancel"] = self.orphans[impl]
        if impl == "leasehold":
            report["design"] = (
                "leasehold.Elector: renewal on a Rust thread (lease / 3), followers "
                "re-check at the holder's expiry and wake on release notifications"
            )
        else:
            report["design"] = (
                "the guide's Elector as written (leasehold.bench.guide): SET NX PX + "
                "INCR fence, renew task on the event loop every ttl/3, followers poll "
                "every ttl/3, release in finally"
            )
        return report


def _brief(case: str, r: Result) -> str:
    if case == "overshoot":
        return f"overshoot {r['overshoot_ms']:.1f} ms (pttl at kill {r['pttl_at_kill_ms']} ms)"
    if case == "handover":
        extra = ", its duty outlived the release" if r["duty_outlived_release"] else ""
        if r["child_exit_code"] != 0:
            extra += f", the leader exited with {r['child_exit_code']}"
        return f"handover {r['handover_ms']:.1f} ms{extra}"
    return (
        f"kept on resume {r['kept_on_resume']}, follower led during block "
        f"{r['follower_led_during_block']}, overlap {r['overlap']} ({r['overlap_ms']} ms)"
    )
