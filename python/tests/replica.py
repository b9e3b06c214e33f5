"""A Python partition replica in its own process, printing the same JSON lines as the
Rust replica (`leasehold-bench partition-child`): `owned` when a handler starts,
`released` when it ends, `joined` once ready. Every handler appends fenced records to
its partition's ledger (`ledger:{partition}`) every 10 ms, as the Rust one does with
`--ledger-url`. SIGTERM leaves gracefully.

    python replica.py --redis-url URL --group G --partitions 24 --replica py-1 --lease-ms 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time

import leasehold


def now_us() -> int:
    return time.time_ns() // 1000


def emit(**line: object) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--replica", required=True)
    parser.add_argument("--lease-ms", type=int, required=True)
    args = parser.parse_args()

    partitions = [f"p{i:04}" for i in range(args.partitions)]
    writer = leasehold.FencedWriter(args.redis_url)

    async def handle(partition: str, lease: leasehold.PartitionLease) -> None:
        emit(event="owned", partition=partition, fence=lease.fence, at_us=now_us())
        writes = 0
        try:
            while True:
                lease.check()
                record = f"{partition},{args.replica},{lease.fence},{writes},{now_us()}"
                try:
                    await writer.rpush(f"ledger:{{{partition}}}", record, lease)
                except leasehold.FenceRejected:
                    emit(event="rejected", partition=partition, fence=lease.fence, at_us=now_us())
                    await lease.lost()
                writes += 1
                await asyncio.sleep(0.01)
        finally:
            emit(
                event="released",
                partition=partition,
                fence=lease.fence,
                at_us=now_us(),
                writes=writes,
                reason=lease.end_reason,
            )

    coordinator = leasehold.Coordinator(
        args.redis_url,
        args.group,
        partitions,
        replica=args.replica,
        lease=args.lease_ms / 1000,
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    coordinator.start(handle)
    await coordinator.ready()
    emit(event="joined", at_us=now_us())
    await stop.wait()
    await coordinator.shutdown()
    emit(event="stopped", at_us=now_us())


if __name__ == "__main__":
    asyncio.run(main())
