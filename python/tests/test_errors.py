"""Bad input and an unreachable Redis: typed exceptions, never a hang or a panic."""

from __future__ import annotations

import asyncio
import time

import pytest

import leasehold
from leasehold import ConfigError, Coordinator, Elector, FencedWriter, GroupAdmin

from conftest import free_port


@pytest.mark.parametrize(
    "url",
    ["not a url", "http://127.0.0.1:6379/", "redis://127.0.0.1:notaport/"],
)
def test_a_bad_url_is_a_config_error(url):
    with pytest.raises(ConfigError, match="redis url"):
        Elector(url, "duty")
    with pytest.raises(ConfigError):
        Coordinator(url, "group", ["p1"])
    with pytest.raises(ConfigError):
        GroupAdmin(url, "group")
    with pytest.raises(ConfigError):
        FencedWriter(url)


@pytest.mark.parametrize("lease", [0, -1.0, float("nan"), float("inf")])
def test_a_bad_lease_is_a_config_error(lease):
    with pytest.raises(ConfigError, match="lease"):
        Elector("redis://127.0.0.1/", "duty", lease=lease)
    with pytest.raises(ConfigError, match="lease"):
        Coordinator("redis://127.0.0.1/", "group", ["p1"], lease=lease)


def test_bad_names_are_config_errors():
    with pytest.raises(ConfigError):
        Elector("redis://127.0.0.1/", "")
    with pytest.raises(ConfigError):
        Elector("redis://127.0.0.1/", "x" * 10_000)
    with pytest.raises(ConfigError):
        Coordinator("redis://127.0.0.1/", "", ["p1"])
    with pytest.raises(ConfigError):
        Coordinator("redis://127.0.0.1/", "group", [])
    with pytest.raises(ConfigError):
        Coordinator("redis://127.0.0.1/", "group", ["p1", "p1"])
    with pytest.raises(ConfigError):
        Coordinator("redis://127.0.0.1/", "group", "p1")
    with pytest.raises(ConfigError):
        Elector("redis://127.0.0.1/", "duty", lease=1.0, renew_interval=5.0)


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError):
        Elector("redis://127.0.0.1/", 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Coordinator("redis://127.0.0.1/", "g", [1, 2])  # type: ignore[list-item]


def test_every_exception_is_a_leasehold_error():
    for cls in (
        leasehold.ConfigError,
        leasehold.StoreError,
        leasehold.StoreUnavailable,
        leasehold.TermOver,
        leasehold.Stopped,
        leasehold.FenceRejected,
        leasehold.HandOffError,
        leasehold.LoadError,
        leasehold.GroupError,
        leasehold.Timeout,
    ):
        assert issubclass(cls, leasehold.LeaseholdError)
    assert issubclass(leasehold.ConfigError, ValueError)
    assert issubclass(leasehold.StoreUnavailable, ConnectionError)
    assert not issubclass(leasehold.StoreError, ConnectionError)
    assert leasehold.RedisError is leasehold.StoreError, "the deprecated alias"
    assert issubclass(leasehold.Timeout, TimeoutError)


async def test_an_unreachable_redis_raises_redis_error_in_bounded_time():
    url = f"redis://127.0.0.1:{free_port()}/"  # nothing listens there
    admin = GroupAdmin(url, "group")
    started = time.monotonic()
    with pytest.raises(leasehold.StoreUnavailable) as raised:
        await asyncio.wait_for(admin.status(), 30)
    assert raised.value.retryable is True
    assert isinstance(raised.value, ConnectionError)
    assert time.monotonic() - started < 30
    writer = FencedWriter(url)
    with pytest.raises(leasehold.StoreError) as raised:
        await asyncio.wait_for(writer.set("k", "v", 1), 30)
    assert raised.value.retryable is True


async def test_an_elector_on_an_unreachable_redis_reports_the_error_and_keeps_trying():
    url = f"redis://127.0.0.1:{free_port()}/"
    async with Elector(url, "duty", replica="a", lease=1.0) as elector:
        elector.start(lambda lease: asyncio.sleep(0))
        deadline = time.monotonic() + 15
        while elector.status().last_error is None:
            assert time.monotonic() < deadline, "the error shows in the status"
            await asyncio.sleep(0.05)
        assert elector.status().role is not leasehold.Role.LEADER


async def test_methods_before_start_raise_stopped():
    coordinator = Coordinator("redis://127.0.0.1/", "group", ["p1"])
    with pytest.raises(leasehold.Stopped):
        coordinator.view()
    elector = Elector("redis://127.0.0.1/", "duty")
    with pytest.raises(leasehold.Stopped):
        await elector.wait_until_leader()
    await elector.shutdown()  # never started: nothing to release, no error
    with pytest.raises(leasehold.Stopped):
        await elector.campaign(lambda lease: asyncio.sleep(0))


async def test_a_panic_in_an_awaitable_raises_never_hangs():
    from leasehold import _leasehold

    with pytest.raises(RuntimeError, match="panicked"):
        await asyncio.wait_for(_leasehold._panic_in_awaitable(), 10)


async def test_renewals_stay_on_time_while_python_holds_the_gil_and_calls_fail(
    redis_url, name
):
    """Failing calls make their exceptions off the core runtime: a loop that holds the
    GIL (a busy handler) while they fail delays no renewal, so a short lease is kept."""
    held: dict[str, leasehold.Lease] = {}

    async def lead(lease: leasehold.Lease) -> None:
        held["lease"] = lease
        await lease.lost()

    async with Elector(redis_url, name, replica="a", lease=0.5) as elector:
        elector.start(lead)
        fence = await asyncio.wait_for(elector.wait_until_leader(), 10)
        # Calls that fail on the runtime: an unknown group, an unreachable Redis.
        missing = GroupAdmin(redis_url, f"{name}-missing")
        unreachable = GroupAdmin(f"redis://127.0.0.1:{free_port()}/", name)
        calls = [asyncio.ensure_future(missing.add(["p"])) for _ in range(50)]
        calls += [asyncio.ensure_future(unreachable.status()) for _ in range(5)]
        # Hold the GIL in a busy loop for four leases (the loop gives it up only at
        # the interpreter's switch interval).
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            pass
        results = await asyncio.wait_for(
            asyncio.gather(*calls, return_exceptions=True), 30
        )
        assert all(isinstance(r, leasehold.LeaseholdError) for r in results), results
        lease = held["lease"]
        assert not lease.is_lost, "the lease was lost while Python held the GIL"
        assert lease.fence == fence
        assert elector.status().fence == fence
