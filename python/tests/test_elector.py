"""Elector: one leader, its duty cancelled when the term ends, renewals off the loop."""

from __future__ import annotations

import asyncio
import time

import pytest

import leasehold
from leasehold import Elector, TermOver


async def eventually(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def lease_key(duty: str) -> str:
    return f"leasehold:{{{duty}}}:lease"


async def test_one_leader_and_a_graceful_hand_over_with_a_higher_fence(redis_url, name):
    leaders: list[tuple[str, int]] = []
    cancelled: list[str] = []

    def lead_as(replica: str):
        async def lead(lease: leasehold.Lease) -> None:
            leaders.append((replica, lease.fence))
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(replica)
                raise

        return lead

    a = Elector(redis_url, name, replica="a", lease=3.0)
    b = Elector(redis_url, name, replica="b", lease=3.0)
    a.start(lead_as("a"))
    await a.wait_until_leader()
    b.start(lead_as("b"))
    await asyncio.sleep(0.5)
    assert leaders == [("a", leaders[0][1])], "one leader while the first holds the lease"
    assert b.status().role is leasehold.Role.FOLLOWER
    assert b.status().leader == "a"

    started = time.monotonic()
    await a.shutdown()
    await eventually(lambda: len(leaders) == 2, what="b to lead")
    took = time.monotonic() - started
    assert cancelled == ["a"], "the old leader's duty was cancelled"
    assert leaders[1][0] == "b" and leaders[1][1] > leaders[0][1], "fences only grow"
    # A release wakes the follower: far sooner than the 3 s lease.
    assert took < 1.5, f"hand-over took {took:.3f}s"
    last_term = a.status().last_term
    assert last_term is not None and last_term.released is True
    await b.shutdown()


async def test_the_duty_is_cancelled_when_the_lease_is_lost_and_check_raises(
    redis_url, redis_server, name
):
    seen: dict[str, object] = {}

    async def lead(lease: leasehold.Lease) -> None:
        seen["lease"] = lease
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    async with Elector(redis_url, name, replica="a", lease=1.0) as elector:
        elector.start(lead)
        await elector.wait_until_leader()
        await eventually(lambda: "lease" in seen)
        lease = seen["lease"]
        assert isinstance(lease, leasehold.Lease)
        # A duty's lease is not a partition's: no hand-off, no load, no partition.
        assert not isinstance(lease, leasehold.PartitionLease)
        assert not hasattr(lease, "hand_off") and not hasattr(lease, "partition")
        lease.check()
        assert 0 < lease.remaining() <= 1.0
        # Another writer takes the key away: the next renewal is refused.
        redis_server.command("SET", lease_key(name), "someone-else", "PX", "60000")
        await asyncio.wait_for(lease.lost(), 3)
        await eventually(lambda: seen.get("cancelled") is True, what="the duty's cancellation")
        assert lease.is_lost
        with pytest.raises(TermOver):
            lease.check()
        assert lease.end_reason is leasehold.EndReason.RENEWAL_REFUSED
        assert lease.end_reason == "renewal_refused", "a str enum: equal to its label"
        assert not lease.end_reason.is_planned


async def test_a_duty_that_raises_ends_its_term_as_failed_and_campaigns_again(redis_url, name):
    terms: list[int] = []

    async def lead(lease: leasehold.Lease) -> None:
        terms.append(lease.fence)
        if len(terms) == 1:
            raise ValueError("the duty broke")
        await asyncio.Event().wait()

    async with Elector(redis_url, name, replica="a", lease=2.0) as elector:
        elector.start(lead)
        await eventually(lambda: len(terms) == 2, timeout=15, what="a second term after the backoff")
        assert elector.failures == 1
        assert elector.terms == 2
        last = elector.status().last_term
        assert last is not None
        assert last.reason is leasehold.EndReason.DUTY_FAILED
        assert "ValueError: the duty broke" in last.detail
        assert last.released is True
        assert terms[1] > terms[0]


async def test_a_duty_that_blocks_the_event_loop_keeps_its_lease(redis_url, name):
    """The guide's pitfall 1: with a 1 s lease, a duty that blocks the loop for 3 s
    keeps the lease (renewals run in Rust, off the loop, without the GIL), and no
    second leader appears meanwhile."""
    after_block: dict[str, object] = {}

    async def lead(lease: leasehold.Lease) -> None:
        fence = lease.fence
        time.sleep(3.0)  # blocks this event loop: no await for 3 leases
        lease.check()  # raises TermOver if the lease was lost meanwhile
        after_block["fence"] = fence
        after_block["remaining"] = lease.remaining()
        await asyncio.Event().wait()

    follower_led: list[int] = []

    async def follow(lease: leasehold.Lease) -> None:
        follower_led.append(lease.fence)
        await asyncio.Event().wait()

    leader = Elector(redis_url, name, replica="a", lease=1.0)
    follower = Elector(redis_url, name, replica="b", lease=1.0)
    try:
        leader.start(lead)
        await leader.wait_until_leader()
        follower.start(follow)
        await eventually(lambda: "fence" in after_block, timeout=10, what="the duty to resume")
        assert after_block["remaining"] > 0
        await asyncio.sleep(0.2)
        assert follower_led == [], "no second leader during the block"
        assert leader.status().role is leasehold.Role.LEADER
        assert leader.status().fence == after_block["fence"]
        assert leader.failures == 0
    finally:
        await leader.shutdown()
        await follower.shutdown()


async def test_step_down_hands_the_lease_to_a_follower(redis_url, name):
    leaders: list[str] = []

    def lead_as(replica: str):
        async def lead(lease: leasehold.Lease) -> None:
            leaders.append(replica)
            await asyncio.Event().wait()

        return lead

    async with Elector(redis_url, name, replica="a", lease=3.0) as a, Elector(
        redis_url, name, replica="b", lease=3.0
    ) as b:
        a.start(lead_as("a"))
        await a.wait_until_leader()
        b.start(lead_as("b"))
        await asyncio.sleep(0.2)
        assert await a.step_down() is True
        await eventually(lambda: leaders[-1:] == ["b"], what="b to lead after the step-down")
        last = a.status().last_term
        assert last is not None and last.reason is leasehold.EndReason.STEPPED_DOWN


async def test_campaign_cancelled_releases_the_lease(redis_url, redis_server, name):
    elector = Elector(redis_url, name, replica="a", lease=5.0)
    led = asyncio.Event()

    async def lead(lease: leasehold.Lease) -> None:
        led.set()
        await asyncio.Event().wait()

    task = asyncio.ensure_future(elector.campaign(lead))
    await asyncio.wait_for(led.wait(), 10)
    assert redis_server.command("EXISTS", lease_key(name)) == b":1\r\n"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert redis_server.command("EXISTS", lease_key(name)) == b":0\r\n", "released on the way out"
    assert elector.status().role is leasehold.Role.STOPPED


async def test_leading_is_a_scope_that_releases_on_exit(redis_url, name):
    a = Elector(redis_url, name, replica="a", lease=3.0)
    b = Elector(redis_url, name, replica="b", lease=3.0)
    async with a.leading() as lease:
        assert a.status().role is leasehold.Role.LEADER
        assert a.status().fence == lease.fence
        b.start(lambda lease: asyncio.Event().wait())
        await asyncio.sleep(0.3)
        assert b.status().role is leasehold.Role.FOLLOWER
    # Left the block: a is stopped and released, b leads at once (no 3 s expiry).
    assert a.status().role is leasehold.Role.STOPPED
    assert lease.end_reason is not None and lease.end_reason.is_planned
    fence = await asyncio.wait_for(b.wait_until_leader(), 1.5)
    assert fence > lease.fence
    with pytest.raises(leasehold.Stopped):
        async with a.leading():
            pass  # one term per elector
    await b.shutdown()


async def test_leading_cancels_the_block_and_raises_term_over_when_the_term_ends(
    redis_url, redis_server, name
):
    elector = Elector(redis_url, name, replica="a", lease=1.0)
    cancelled = False
    with pytest.raises(TermOver):
        async with elector.leading() as lease:
            # Another writer takes the key away: the next renewal is refused.
            redis_server.command("SET", lease_key(name), "someone-else", "PX", "60000")
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled = True
                raise
    assert cancelled
    assert lease.end_reason is leasehold.EndReason.RENEWAL_REFUSED
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0, "the scope's own cancel is taken back"


async def test_an_exception_in_the_leading_block_propagates_and_counts_as_a_failure(
    redis_url, name
):
    elector = Elector(redis_url, name, replica="a", lease=2.0)
    with pytest.raises(ValueError, match="the duty broke"):
        async with elector.leading():
            raise ValueError("the duty broke")
    assert elector.failures == 1
    last = elector.status().last_term
    assert last is not None and last.reason is leasehold.EndReason.DUTY_FAILED
