"""``python -m leasehold.bench side-by-side|partitions ...`` (see the package's doc)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from typing import Any, Awaitable, Callable

from ._util import BenchError, ThrowawayRedis, header, progress


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more: {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m leasehold.bench",
        description="leasehold beside the design guide's election: one JSON line on stdout.",
    )
    modes = p.add_subparsers(dest="command", metavar="{side-by-side,partitions}", required=True)
    url_help = (
        "an existing Redis (keys of its own per run, deleted afterwards); default: "
        "a throwaway redis-server on a free loopback port"
    )

    s = modes.add_parser(
        "side-by-side",
        help="failover overshoot, graceful hand-over, blocked event loop",
        description="One duty: SIGKILL overshoot, SIGTERM hand-over and a blocked "
        "event loop, leasehold's Elector beside the guide's, run alternately.",
    )
    s.add_argument("--lease-ms", type=_positive_int, default=1000)
    s.add_argument("--runs", type=_positive_int, default=10,
                   help="SIGKILL and SIGTERM runs per implementation (default 10)")
    s.add_argument("--blocked-runs", type=_non_negative_int, default=3,
                   help="blocked-loop runs per implementation (default 3)")
    s.add_argument("--redis-url", help=url_help)

    q = modes.add_parser(
        "partitions",
        help="P partitions over N replica processes: Redis load and spread",
        description="N replica processes over P partitions: time until all are owned, "
        "Redis CPU and commands/s, and the spread, for leasehold's Coordinator and the "
        "guide's lead_partitions.",
    )
    q.add_argument("--partitions", type=_positive_int, default=1000)
    q.add_argument("--replicas", type=_positive_int, default=4)
    q.add_argument("--lease-ms", type=_positive_int, default=10000)
    q.add_argument("--seconds", type=_positive_float, default=30.0,
                   help="measuring window once all partitions are owned (default 30)")
    q.add_argument("--own-timeout", type=_positive_float, default=None,
                   help="seconds to wait for every partition to be owned "
                   "(default max(30, 6 leases))")
    q.add_argument("--guide-pool", type=_positive_int, default=50,
                   help="connections of each guide replica's redis-py pool (default 50)")
    q.add_argument("--rust-bench", metavar="PATH",
                   help="the leasehold-bench binary: also run the group from Rust replicas "
                   "(its partition-child mode), measured the same way, to compare the Python "
                   "replicas' Redis cost with theirs")
    q.add_argument("--redis-url", help=url_help)

    from . import child

    c = modes.add_parser("_child")  # hidden: no help, not in the metavar
    child.add_arguments(c)
    return p


async def _with_redis(
    args: argparse.Namespace, run: Callable[[str], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    import redis.asyncio

    server: ThrowawayRedis | None = None
    url = args.redis_url
    try:
        if url is None:
            server = ThrowawayRedis()
            # Started from this (the main) thread: the server dies with it if the
            # bench is killed (PR_SET_PDEATHSIG follows the forking thread).
            url = server.start()
        probe = redis.asyncio.Redis.from_url(url, decode_responses=True)
        try:
            version = (await probe.info("server"))["redis_version"]
        finally:
            await probe.aclose()
        report = header(args.command, url, version, server)
        report.update(await run(url))
        return report
    finally:
        if server is not None:
            server.stop()


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if task is not None:  # SIGTERM: clean up (children, throwaway server) as for ^C
        loop.add_signal_handler(signal.SIGTERM, task.cancel)

    if args.command == "side-by-side":
        from .side_by_side import SideBySide

        async def run(url: str) -> dict[str, Any]:
            bench = SideBySide(url, args.lease_ms, args.runs, args.blocked_runs)
            out: dict[str, Any] = {
                "lease_ms": args.lease_ms,
                "runs": args.runs,
                "blocked_runs": args.blocked_runs,
                "method": {
                    "overshoot_ms": "leader child SIGKILLed; follower lead() start minus the "
                    "lease key's real expiry (PTTL read after the reap, 3 reads intersected; "
                    "time.monotonic)",
                    "handover_ms": "leader child SIGTERMed; follower lead() start minus the "
                    "child's step-down start (both time.time())",
                    "blocked_loop": "leader child's duty time.sleep(3 * lease); lease_kept: "
                    "held on resuming in every run and the follower never led meanwhile; "
                    "overlaps: runs where the follower led before the blocked duty stopped",
                    "phases": "follower started at a random point of lease/3 after the leader "
                    "led; kill/SIGTERM lease/3 to 2*lease/3 later (random), so neither the "
                    "renew nor the guide's poll cycle is phase-locked",
                },
            }
            out.update(await bench.run())
            return out

    else:
        from .partitions import Partitions

        own_timeout = args.own_timeout or max(30.0, 6 * args.lease_ms / 1000)

        async def run(url: str) -> dict[str, Any]:
            bench = Partitions(
                url, args.partitions, args.replicas, args.lease_ms, args.seconds,
                own_timeout, args.guide_pool, args.rust_bench,
            )
            out: dict[str, Any] = {
                "partitions": args.partitions,
                "replicas": args.replicas,
                "lease_ms": args.lease_ms,
                "seconds": args.seconds,
                "guide_as_written": "no cap, no jitter: every replica campaigns for every partition",
                "method": "replicas report their running handlers every 0.25 s; "
                "time_to_all_owned_ms from spawning the replicas until the counts add up "
                "to P; then INFO deltas over the window; spread = counts at its end. "
                "leasehold starts only once Redis is up for a lease (it grants nothing "
                "before: waited_for_fresh_redis_s)",
            }
            out.update(await bench.run())
            return out

    return await _with_redis(args, run)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "_child":
        from . import child

        return child.main(args)
    try:
        import redis  # noqa: F401
    except ImportError:
        print("the bench needs the redis package: pip install 'leasehold[bench]'", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="[bench] %(name)s %(levelname)s: %(message)s")
    try:
        report = asyncio.run(_main(args))
    except BenchError as exc:
        progress(f"failed: {exc}")
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        progress("interrupted")
        return 130
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
