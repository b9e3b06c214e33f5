"""``partitions``: N replica processes share P partitions.

leasehold: one :class:`~leasehold.Coordinator` per replica over ``p0000``...;
guide: the guide's ``lead_partitions`` per replica (one guide ``Elector`` per
partition, ``ttl = lease``, every replica campaigning for every partition: no cap, no
jitter, as written). Handlers only hold their partition.

Each replica reports how many partitions it holds (running handlers) every quarter
second. The bench waits until the reports add up to P (or a timeout), then measures
over ``--seconds``: Redis's CPU (INFO ``used_cpu_sys + used_cpu_user``, per wall
second, percent of one core), Redis's commands per second (INFO
``total_commands_processed``), and the spread of the partitions over the replicas.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from ._util import IMPLS, BenchError, Child, RustChild, progress

REPORT_EVERY = 0.25


class Partitions:
    def __init__(
        self,
        url: str,
        partitions: int,
        replicas: int,
        lease_ms: int,
        seconds: float,
        own_timeout: float,
        guide_pool: int,
        rust_bench: str | None = None,
    ) -> None:
        import redis.asyncio

        self.url = url
        self.partitions = partitions
        self.replicas = replicas
        self.lease_ms = lease_ms
        self.seconds = seconds
        self.own_timeout = own_timeout
        self.guide_pool = guide_pool
        # With the Rust replica binary: the same group of Rust replicas too, measured
        # the same way on the same server (the Python replicas' Redis cost against it).
        self.rust_bench = rust_bench
        self.redis = redis.asyncio.Redis.from_url(url, decode_responses=True)

    async def _cpu_and_commands(self) -> tuple[float, float, int]:
        cpu = await self.redis.info("cpu")
        stats = await self.redis.info("stats")
        return (
            time.monotonic(),
            float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
            int(stats["total_commands_processed"]),
        )

    async def one(self, impl: str) -> dict[str, Any]:
        suffix = secrets.token_hex(3)
        group = f"bench-{impl}-{suffix}"
        if impl == "rust":
            assert self.rust_bench is not None
            children: list[Child] = [
                RustChild(
                    f"rust replica {i}",
                    [
                        "partition-child", "--redis-url", self.url, "--group", group,
                        "--partitions", str(self.partitions), "--replica", f"r{i}-{suffix}",
                        "--lease-ms", str(self.lease_ms),
                    ],
                    program=[self.rust_bench],
                )
                for i in range(self.replicas)
            ]
        else:
            children = [
                Child(
                    f"{impl} replica {i}",
                    [
                        "replica", "--impl", impl, "--url", self.url, "--group", group,
                        "--partitions", str(self.partitions), "--replica", f"r{i}-{suffix}",
                        "--lease-ms", str(self.lease_ms), "--report-every", str(REPORT_EVERY),
                        "--guide-pool", str(self.guide_pool),
                    ],
                )
                for i in range(self.replicas)
            ]
        started = time.monotonic()
        try:
            for child in children:
                await child.__aenter__()
            result = await self._measure(impl, children, started)
            stopping = time.monotonic()
            codes = await self._stop(children)
            result["shutdown"] = self._shutdown_report(impl, children, codes, stopping)
            return result
        finally:
            for child in children:
                await child.close()
            await self._cleanup(impl, group)

    def _counts(self, children: list[Child]) -> list[dict[str, Any] | None]:
        return [child.latest("count") for child in children]

    async def _measure(self, impl: str, children: list[Child], started: float) -> dict[str, Any]:
        deadline = started + self.own_timeout
        all_owned_ms: float | None = None
        last_note = 0.0
        while True:
            for child in children:
                if child.eof:
                    raise BenchError(f"{child.name} exited (code {child.returncode})")
            counts = self._counts(children)
            total = sum(c["owned"] for c in counts if c)
            now = time.monotonic()
            if total >= self.partitions:
                all_owned_ms = (now - started) * 1000
                break
            if now >= deadline:
                progress(f"{impl}: only {total} of {self.partitions} owned after {self.own_timeout:.0f} s")
                break
            if now - last_note >= 5:
                last_note = now
                progress(f"{impl}: {total} of {self.partitions} owned")
            await asyncio.sleep(0.05)
        progress(
            f"{impl}: all {self.partitions} owned after {all_owned_ms:.0f} ms; measuring {self.seconds:g} s"
            if all_owned_ms is not None
            else f"{impl}: measuring {self.seconds:g} s anyway"
        )
        before_counts = self._counts(children)
        t0, cpu0, cmd0 = await self._cpu_and_commands()
        await asyncio.sleep(self.seconds)
        t1, cpu1, cmd1 = await self._cpu_and_commands()
        counts = self._counts(children)
        owned = [c["owned"] if c else 0 for c in counts]
        wall = t1 - t0
        terms = sum(
            (c["terms"] if c else 0) - (b["terms"] if b else 0) for c, b in zip(counts, before_counts)
        )
        result: dict[str, Any] = {
            "redis_cpu_percent": round((cpu1 - cpu0) / wall * 100, 2),
            "commands_per_second": round((cmd1 - cmd0) / wall, 1),
            "spread": {"min": min(owned), "max": max(owned), "counts": owned},
            "owned": sum(owned),
            "time_to_all_owned_ms": None if all_owned_ms is None else round(all_owned_ms, 1),
            "all_owned": all_owned_ms is not None,
            "terms_started_during_window": terms,
            "window_s": round(wall, 3),
        }
        if impl == "leasehold":
            result["design"] = (
                "leasehold.Coordinator per replica: floor(P/N)..ceil(P/N) per replica"
            )
        elif impl == "rust":
            result["design"] = (
                "leasehold_partitions::Coordinator per replica (leasehold-bench "
                "partition-child): the same scripts and keys, from Rust"
            )
        else:
            result["design"] = (
                "the guide's lead_partitions as written: one Elector per partition and "
                "replica (ttl = lease, polls every ttl/3), no cap, no jitter; one redis.asyncio "
                f"client per replica over a BlockingConnectionPool of {self.guide_pool}"
            )
            result["lost_leadership_logs"] = sum(c.get("lost", 0) for c in counts if c)
            result["election_errors"] = sum(c.get("errors", 0) for c in counts if c)
            first = next((c.get("first_error") for c in counts if c and c.get("first_error")), None)
            if first:
                result["first_election_error"] = first
        if impl == "leasehold":
            result["ready"] = [bool(c and c.get("ready")) for c in counts]
            result["handler_failures"] = sum(c.get("failures", 0) for c in counts if c)
        return result

    def _shutdown_report(
        self, impl: str, children: list[Child], codes: list[int], stopping: float
    ) -> dict[str, Any]:
        """How the replicas left (SIGTERM): the measurements were taken before."""
        finals = [child.latest("count") or {} for child in children]
        report: dict[str, Any] = {
            "seconds": round(time.monotonic() - stopping, 3),
            # Exited other than with 0: a crash on the way out, or killed (-9) after
            # not leaving in time.
            "exit_failures": [c for c in codes if c != 0],
            "stopped_cleanly": [child.latest("stopped") is not None for child in children],
        }
        if impl == "guide":
            # Cancellations redis-py swallowed (see child.replica_guide).
            report["campaigns_still_running_2s_after_cancel"] = sum(
                f.get("campaigns_still_running_2s_after_cancel", 0) for f in finals
            )
            report["election_errors"] = sum(f.get("errors", 0) for f in finals)
            last = [f.get("last_error") for f in finals if f.get("last_error")]
            if last:
                report["last_election_error"] = last[0]
        return report

    async def _stop(self, children: list[Child]) -> list[int]:
        for child in children:
            child.terminate()
        return [await child.wait(timeout=15 + 2 * self.lease_ms / 1000) for child in children]

    async def _cleanup(self, impl: str, group: str) -> None:
        pattern = f"leader:{group}:*" if impl == "guide" else f"leasehold:{{{group}}}*"
        try:
            batch: list[str] = []
            async for key in self.redis.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    await self.redis.unlink(*batch)
                    batch.clear()
            if batch:
                await self.redis.unlink(*batch)
        except Exception as exc:  # only tidiness: the names are never reused
            progress(f"could not delete the keys of {group}: {exc}")

    async def _past_fresh_server(self) -> float:
        """leasehold grants nothing on a Redis server up for less than one lease
        (it cannot tell a fresh server from one that restarted and lost its leases:
        docs/election.md), so on a server that just started (the throwaway one) its
        time to own everything would include that wait. Waits it out first; returns
        the seconds waited."""
        uptime = int((await self.redis.info("server"))["uptime_in_seconds"])
        # Redis counts whole seconds: uptime - 1 s >= the lease is surely past it.
        wait = self.lease_ms / 1000 - (uptime - 1)
        if wait <= 0:
            return 0.0
        progress(f"redis is up for {uptime} s only: waiting {wait:.0f} s (one lease after its start)")
        await asyncio.sleep(wait)
        return round(wait, 3)

    async def run(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        impls = IMPLS + ("rust",) if self.rust_bench else IMPLS
        for impl in impls:
            waited = await self._past_fresh_server() if impl != "guide" else 0.0
            progress(f"{impl}: {self.replicas} replicas, {self.partitions} partitions")
            out[impl] = await self.one(impl)
            if impl != "guide":
                out[impl]["waited_for_fresh_redis_s"] = waited
            progress(f"{impl}: {_brief(out[impl])}")
        if "rust" in out and out["rust"]["redis_cpu_percent"]:
            out["python_vs_rust_redis_cpu"] = round(
                out["leasehold"]["redis_cpu_percent"] / out["rust"]["redis_cpu_percent"], 2
            )
        await self.redis.aclose()
        return out


def _brief(r: dict[str, Any]) -> str:
    return (
        f"redis cpu {r['redis_cpu_percent']}%, {r['commands_per_second']} cmd/s, "
        f"spread {r['spread']['counts']}, owned {r['owned']}"
    )
