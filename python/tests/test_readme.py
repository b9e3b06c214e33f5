"""The README's examples run as written, with nothing but a Redis: each starts, does
what it says, and stops cleanly on SIGINT."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def examples() -> list[str]:
    with open(README, encoding="utf-8") as file:
        blocks = re.findall(r"```python\n(.*?)```", file.read(), re.S)
    return [block for block in blocks if "asyncio.run(main())" in block]


def run(code: str, url: str, expect: str, tmp_path) -> str:
    script = tmp_path / "example.py"
    script.write_text(code)
    process = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "REDIS_URL": url},
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True)
    reader.start()
    deadline = time.monotonic() + 20
    output = ""
    while expect not in output:
        try:
            output += lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            process.kill()
            pytest.fail(f"the example never printed {expect!r} within 20 s:\n{output}")
    process.send_signal(signal.SIGINT)
    process.wait(timeout=20)
    reader.join(timeout=5)
    while not lines.empty():
        output += lines.get()
    assert process.returncode == 0, output
    assert "stopped" in output and "Traceback" not in output, output
    return output


def test_the_readme_has_both_examples():
    assert len(examples()) == 2


def test_the_duty_example_leads_and_stops_cleanly(redis_url, tmp_path):
    run(examples()[0], redis_url, "leading with fence", tmp_path)


def test_the_partitions_example_serves_and_stops_cleanly(redis_url, tmp_path):
    output = run(examples()[1], redis_url, "holding 32 of 32", tmp_path)
    assert output.count("serving tenant-") == 32


def recipe() -> str:
    with open(README, encoding="utf-8") as file:
        blocks = re.findall(r"```python\n(.*?)```", file.read(), re.S)
    (block,) = [block for block in blocks if "async def consume(tenant, lease)" in block]
    return block


async def test_the_recipe_outputs_every_entry_exactly_once(redis_url, name):
    """The README's recipe handler, as written, in two coordinators of one group while
    entries arrive; one leaves mid-way (its cursors handed over), then every stream is
    drained: each tenant's output is its stream's ids, in order, once each."""
    import asyncio

    import redis.asyncio as aredis

    from leasehold import Coordinator

    namespace: dict = {"URL": redis_url}
    exec(compile(recipe(), "README.md (the recipe)", "exec"), namespace)
    consume = namespace["consume"]
    tenants = [f"{name}-{i}" for i in range(4)]
    client = aredis.Redis.from_url(redis_url, decode_responses=True)

    async def produce(stop: asyncio.Event) -> None:
        while not stop.is_set():
            for tenant in tenants:
                await client.xadd(f"stream:{{{tenant}}}", {"n": 1})
            await asyncio.sleep(0.02)

    replicas = [
        Coordinator(redis_url, name, tenants, replica=r, lease=2.0) for r in ("a", "b")
    ]
    stop = asyncio.Event()
    producer = asyncio.ensure_future(produce(stop))
    try:
        for replica in replicas:
            replica.start(consume)
        for replica in replicas:
            await asyncio.wait_for(replica.ready(), 30)
        await asyncio.sleep(1.0)
        await replicas[0].shutdown()  # a graceful leave: b takes every tenant
        await asyncio.sleep(1.0)
        stop.set()
        await producer
        deadline = time.monotonic() + 30
        for tenant in tenants:
            ids = [entry for entry, _ in await client.xrange(f"stream:{{{tenant}}}")]
            while await client.get(f"cursor:{{{tenant}}}") != ids[-1]:
                assert time.monotonic() < deadline, f"{tenant}: not drained"
                await asyncio.sleep(0.05)
            assert await client.lrange(f"out:{{{tenant}}}", 0, -1) == ids, tenant
    finally:
        stop.set()
        await producer
        for replica in replicas:
            await replica.shutdown()
        await namespace["streams"].aclose()
        await client.aclose()
