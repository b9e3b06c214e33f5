"""``FencedWriter.batch``: several keys' fenced writes, all or none, in one script."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aredis

import leasehold
from leasehold import ConfigError, Elector, FenceRejected, FencedBatch, FencedWriter


@pytest.fixture
async def client(redis_url):
    client = aredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


async def test_a_batch_writes_every_key_and_raises_every_fence(redis_url, name, client):
    writer = FencedWriter(redis_url)
    out, cursor, state = f"out:{{{name}}}", f"cursor:{{{name}}}", f"state:{{{name}}}"
    batch = writer.batch().rpush(out, "1-0").set(cursor, "1-0").hset(state, "f", b"v")
    assert isinstance(batch, FencedBatch)
    assert len(batch) == 3
    await batch.commit(5)
    assert await client.lrange(out, 0, -1) == ["1-0"]
    assert await client.get(cursor) == "1-0"
    assert await client.hgetall(state) == {"f": "v"}
    # An equal fence is accepted (one term commits many batches); every key's fence is 5.
    await writer.batch().rpush(out, "2-0").set(cursor, "2-0").commit(5)
    assert await client.lrange(out, 0, -1) == ["1-0", "2-0"]
    for key in (out, cursor, state):
        with pytest.raises(FenceRejected):
            await writer.set(key, "old", 4)


async def test_a_stale_batch_writes_nothing(redis_url, name, client):
    writer = FencedWriter(redis_url)
    out, cursor = f"out:{{{name}}}", f"cursor:{{{name}}}"
    await writer.batch().rpush(out, "1-0").set(cursor, "1-0").commit(3)
    # A newer term raises one of the two keys only: the old term's batch is refused
    # whole, its output too.
    await writer.raise_fence(cursor, 4)
    with pytest.raises(FenceRejected, match="stale fence 3") as raised:
        await writer.batch().rpush(out, "2-0").set(cursor, "2-0").commit(3)
    assert raised.value.fence == 3 and raised.value.highest == 4
    assert await client.lrange(out, 0, -1) == ["1-0"]
    assert await client.get(cursor) == "1-0"


async def test_a_batch_of_raises_refuses_older_terms_on_every_key(redis_url, name, client):
    writer = FencedWriter(redis_url)
    out, cursor = f"out:{{{name}}}", f"cursor:{{{name}}}"
    await writer.batch().raise_fence(out).raise_fence(cursor).commit(7)
    assert await client.exists(out, cursor) == 0  # raised, not written
    with pytest.raises(FenceRejected):
        await writer.batch().rpush(out, "x").commit(6)
    with pytest.raises(FenceRejected):
        await writer.set(cursor, "x", 6)
    await writer.batch().rpush(out, "x").set(cursor, "x").commit(7)


async def test_a_key_of_the_wrong_type_fails_the_batch_with_nothing_written(
    redis_url, name, client
):
    writer = FencedWriter(redis_url)
    out, cursor = f"out:{{{name}}}", f"cursor:{{{name}}}"
    await client.set(out, "a string, not a list")
    with pytest.raises(leasehold.StoreError) as raised:
        await writer.batch().set(cursor, "1-0").rpush(out, "1-0").commit(1)
    # WRONGTYPE: not retryable, not a ConnectionError.
    assert raised.value.retryable is False
    assert not isinstance(raised.value, ConnectionError)
    assert await client.get(cursor) is None


async def test_a_lease_is_a_fence(redis_url, name, client):
    writer = FencedWriter(redis_url)
    key = f"k:{{{name}}}"
    fences: list[int] = []

    async def lead(lease: leasehold.Lease) -> None:
        await writer.batch().set(key, str(lease.fence)).commit(lease)
        fences.append(lease.fence)
        await lease.lost()

    async with Elector(redis_url, name, lease=2.0) as elector:
        elector.start(lead)
        while not fences:
            await asyncio.sleep(0.02)
    assert await client.get(key) == str(fences[0])


@pytest.mark.parametrize("value", [1, None, 1.5, ["a"], {"a": 1}, bytearray(b"a")])
def test_a_value_that_is_not_text_is_a_config_error(value):
    batch = FencedWriter("redis://127.0.0.1/").batch()
    with pytest.raises(ConfigError, match="str or bytes"):
        batch.set("k{t}", value)
    with pytest.raises(ConfigError, match="str or bytes"):
        batch.hset("k{t}", "f", value)
    with pytest.raises(ConfigError, match="str or bytes"):
        batch.hset("k{t}", value, "v")
    with pytest.raises(ConfigError, match="str or bytes"):
        batch.rpush("k{t}", value)
    with pytest.raises(ConfigError, match="str or bytes"):
        batch.raise_fence(value)
    with pytest.raises(ConfigError, match="str or bytes"):
        batch.set(value, "v")
    assert len(batch) == 0  # nothing was added


def test_bytes_that_are_not_utf8_are_a_config_error():
    batch = FencedWriter("redis://127.0.0.1/").batch()
    with pytest.raises(ConfigError, match="UTF-8"):
        batch.set("k{t}", b"\xff\xfe")
    batch.set("k{t}", "é".encode())
    assert len(batch) == 1


async def test_a_batch_that_can_never_be_made_is_a_config_error(redis_url, name, client):
    writer = FencedWriter(redis_url)
    with pytest.raises(ConfigError, match="at least one key"):
        await writer.batch().commit(1)
    with pytest.raises(ConfigError, match="empty"):
        await writer.batch().set("a{t}", "1").raise_fence("").commit(1)
    # Without one hash tag, the keys hash to different Redis Cluster slots: refused
    # before anything is sent, on a single server too.
    out, cursor = f"out:{name}", f"cursor:{name}"
    with pytest.raises(ConfigError, match="same hash tag"):
        await writer.batch().rpush(out, "1").set(cursor, "1").commit(1)
    assert await client.exists(out, cursor) == 0


@pytest.mark.parametrize("fence", [-1, 2**64, True, "3", 1.0, None])
async def test_a_bad_fence_is_a_config_error(fence):
    writer = FencedWriter("redis://127.0.0.1/")
    with pytest.raises(ConfigError, match="fence"):
        await writer.batch().set("k{t}", "v").commit(fence)
    with pytest.raises(ConfigError, match="fence"):
        await writer.set("k{t}", "v", fence)


TYPED = '''
import leasehold
from leasehold import FencedBatch, FencedWriter


async def step(writer: FencedWriter, lease: leasehold.Lease, entry: str) -> int:
    batch: FencedBatch = writer.batch().rpush("out:{t}", entry).set("cursor:{t}", b"x")
    await batch.hset("state:{t}", "f", entry).raise_fence("other:{t}").commit(lease)
    await writer.batch().set("k:{t}", "v").commit(lease.fence)
    return len(batch)
'''

MISTYPED = '''
from leasehold import FencedWriter


async def step(writer: FencedWriter) -> None:
    await writer.batch().set("k:{t}", 1).commit("3")
'''


def test_the_batch_is_typed_for_mypy_strict(tmp_path):
    """The stubs type the batch for ``mypy --strict`` (skipped where mypy is not
    installed): a correct use checks, a wrong value and fence do not."""
    pytest.importorskip("mypy")
    import subprocess
    import sys

    def mypy(code: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / "typed.py"
        path.write_text(code)
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )

    good = mypy(TYPED)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = mypy(MISTYPED)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert bad.stdout.count("error:") == 2, bad.stdout
