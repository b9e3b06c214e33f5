"""Router: a client's table of owners follows a group's moves; Coordinator.owns and
misrouted; bad input and a missing group are typed errors, never a hang."""

from __future__ import annotations

import asyncio
import time

import pytest

import leasehold
from leasehold import Coordinator, GroupAdmin, Route, RouteChange, Router, RouterStatus

from conftest import free_port
from test_coordinator import Fleet
from test_elector import eventually

PARTITIONS = [f"p{i:02}" for i in range(6)]


def agrees(router: Router, fleet: Fleet) -> bool:
    """Every partition routed to the replica that owns it, with its term's fence."""
    routes = router.routes()
    if sorted(routes) != PARTITIONS:
        return False
    for partition, route in routes.items():
        owner = fleet.coordinators.get(route.replica)
        if owner is None or owner.owns(partition) != route.fence:
            return False
        if router.owner(partition) != route:
            return False
    return True


async def test_a_router_follows_the_coordinators_partitions(redis_url, name):
    fleet = Fleet(redis_url, name, partitions=PARTITIONS, lease=2.0)
    a = fleet.start("a", advertise="127.0.0.1:8001")
    try:
        await asyncio.wait_for(a.ready(), 15)
        async with Router(redis_url, name) as router:
            await router.ready(timeout=10)
            await eventually(lambda: agrees(router, fleet), what="the router names a's terms")
            route = router.owner("p00")
            assert route is not None
            assert (route.replica, route.address) == ("a", "127.0.0.1:8001")
            assert route.fence == a.owns("p00")
            assert router.owner("no-such-partition") is None
            status = router.status()
            assert isinstance(status, RouterStatus)
            assert status.ready and status.group_exists and status.routes == 6
            assert status.incarnation is not None and status.full_reads >= 1
    finally:
        await fleet.stop()


async def test_a_second_coordinator_joining_moves_routes(redis_url, name):
    fleet = Fleet(redis_url, name, partitions=PARTITIONS, lease=2.0)
    a = fleet.start("a", advertise="127.0.0.1:8001")
    try:
        await asyncio.wait_for(a.ready(), 15)
        router = a.router()
        await router.ready(timeout=10)
        await eventually(lambda: agrees(router, fleet), what="a owns all")
        seen: list[RouteChange] = []

        async def collect() -> None:
            async for change in router.changes():
                seen.append(change)

        collector = asyncio.ensure_future(collect())
        await asyncio.sleep(0)  # the iterator subscribed when changes() was called
        b = fleet.start("b", advertise="127.0.0.1:8002")
        await asyncio.wait_for(b.ready(), 15)

        def split() -> bool:
            replicas = [r.replica for r in router.routes().values()]
            return agrees(router, fleet) and sorted(replicas) == ["a"] * 3 + ["b"] * 3

        await eventually(split, timeout=20, what="three routes each")
        for partition, route in router.routes().items():
            assert route.address == ("127.0.0.1:8001" if route.replica == "a" else "127.0.0.1:8002")
            if route.replica == "b":
                assert a.owns(partition) is None
        # Every move to b was pushed to the iterator, with b's fence.
        await eventually(
            lambda: {c.partition for c in seen if c.route and c.route.replica == "b"}
            == {p for p, r in router.routes().items() if r.replica == "b"},
            what="the changes name b's partitions",
        )
        await router.shutdown()
        await asyncio.wait_for(collector, 5)  # the iterator ends with the router
    finally:
        await fleet.stop()


async def test_ready_raises_timeout_when_the_group_never_exists(redis_url, name):
    router = Router(redis_url, name)
    started = time.monotonic()
    with pytest.raises(leasehold.Timeout, match="does not exist") as raised:
        await router.ready(timeout=0.5)
    assert isinstance(raised.value, TimeoutError)
    assert isinstance(raised.value, leasehold.LeaseholdError)
    assert time.monotonic() - started < 5
    assert router.owner("p00") is None and router.routes() == {}
    assert not router.status().ready and not router.status().group_exists
    await router.shutdown()
    # Shut down before it was ready: never a hang.
    with pytest.raises(leasehold.Stopped):
        await asyncio.wait_for(router.ready(), 5)
    await router.shutdown()  # idempotent


async def test_ready_raises_timeout_when_redis_is_unreachable():
    router = Router(f"redis://127.0.0.1:{free_port()}/", "g")
    with pytest.raises(leasehold.Timeout, match="Redis"):
        await asyncio.wait_for(router.ready(timeout=0.5), 10)
    await router.shutdown()


async def test_a_router_from_an_admin_and_owns_before_start(redis_url, name):
    coordinator = Coordinator(redis_url, name, PARTITIONS, replica="a", lease=2.0)
    assert coordinator.owns("p00") is None  # not started: owns nothing
    coordinator.misrouted("p00")  # nothing to count, no error
    async with GroupAdmin(redis_url, name).router() as router:
        assert router.group == name
        coordinator.start(lambda partition, lease: asyncio.Event().wait())
        try:
            await router.ready(timeout=10)
            # The route is published by the claim; owns() answers once the term runs.
            await eventually(
                lambda: len(router.routes()) == 6
                and all(coordinator.owns(p) is not None for p in PARTITIONS),
                what="six routes, six terms",
            )
            for partition in PARTITIONS:
                fence = coordinator.owns(partition)
                assert fence is not None
                assert router.owner(partition) == Route("a", None, fence)
            coordinator.misrouted("p00")
        finally:
            await coordinator.shutdown()
        assert all(coordinator.owns(p) is None for p in PARTITIONS)


async def test_bad_input_is_a_typed_error(redis_url):
    with pytest.raises(leasehold.ConfigError):
        Router(redis_url, "")
    with pytest.raises(leasehold.ConfigError):
        Router(redis_url, "g", key_prefix="")
    with pytest.raises(leasehold.ConfigError):
        Router("not a url", "g")
    with pytest.raises(TypeError):
        Router(redis_url, 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Router(redis_url, None)  # type: ignore[arg-type]
    async with Router(redis_url, "g") as router:
        with pytest.raises(TypeError):
            router.owner(42)  # type: ignore[arg-type]
        for timeout in (-1.0, float("nan"), float("inf")):
            with pytest.raises(leasehold.ConfigError, match="timeout"):
                await router.ready(timeout=timeout)
    coordinator = Coordinator(redis_url, "g", ["p0"], replica="a")
    with pytest.raises(TypeError):
        coordinator.owns(None)  # type: ignore[arg-type]


def test_a_route_is_a_frozen_value():
    route = Route("a", "10.0.0.7:8080", 7)
    assert route == Route("a", "10.0.0.7:8080", 7) and route != Route("a", None, 7)
    assert len({route, Route("a", "10.0.0.7:8080", 7)}) == 1
    assert repr(route) == "Route(replica='a', address='10.0.0.7:8080', fence=7)"
    with pytest.raises(AttributeError):
        route.fence = 8  # type: ignore[misc]
    match route:
        case Route(replica, address, fence):
            assert (replica, address, fence) == ("a", "10.0.0.7:8080", 7)
