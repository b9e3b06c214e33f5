"""The typed results of leasehold: enums and frozen dataclasses.

Every duration is a ``float`` of seconds (as every duration leasehold takes:
``lease=3.0``, ``Lease.remaining()``); every point in time is an aware
:class:`datetime.datetime` in UTC. The enums are ``str`` enums: a member equals its
label (``EndReason.HANDOFF == "handoff"``), as the Rust core, the CLI and the
metrics spell it.

These are built from what the Rust core reports; a field the core did not report is
an error (:class:`~leasehold.LeaseholdError`, naming the field), never a default.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, TypeVar

__all__ = [
    "EndReason",
    "MoveCause",
    "ReplicaState",
    "Role",
    "PartitionOwner",
    "ReplicaStatus",
    "GroupStatus",
    "Move",
    "LastTerm",
    "ElectorStatus",
]


class EndReason(str, enum.Enum):
    """Why a term ended (:attr:`Lease.end_reason`).

    A duty's term ends for one of the first eight; a partition's for one of the
    causes the group's ledger records (:class:`MoveCause`).
    """

    # A duty's (the elector's) reasons.
    RENEWAL_REFUSED = "renewal_refused"
    """Redis refused a renewal: the key was gone or held by another term."""
    DEADLINE_PASSED = "deadline_passed"
    """The local deadline passed without a successful renewal."""
    BACKEND_ERROR = "backend_error"
    """A renewal failed with an error retrying cannot fix (WRONGTYPE, ACL)."""
    SHUTDOWN = "shutdown"
    """The elector was shut down."""
    DUTY_RETURNED = "duty_returned"
    """The duty returned."""
    DUTY_FAILED = "duty_failed"
    """The duty raised."""
    DUTY_PANICKED = "duty_panicked"
    """The duty panicked (Rust)."""
    STEPPED_DOWN = "stepped_down"
    """:meth:`Elector.step_down` released it so another replica leads."""
    # A partition's causes (the same labels as :class:`MoveCause`).
    HANDOFF = "handoff"
    """Handed over to even out the group."""
    DRAIN = "drain"
    """The replica was drained."""
    LEAVE = "leave"
    """The replica left (a graceful shutdown)."""
    REMOVAL = "removal"
    """The partition was removed from the group's set."""
    RELEASED = "released"
    """Released otherwise (the handler returned or raised)."""
    EXPIRY = "expiry"
    """The lease was lost: it expired, or a renewal was refused."""
    NEW = "new"
    """(A ledger cause only: a partition's first term.)"""

    def __str__(self) -> str:
        return self.value

    @property
    def is_planned(self) -> bool:
        """Whether someone asked for it (a shutdown, a hand-over, a drain, ...),
        rather than the lease being lost or the duty failing."""
        return self not in _UNPLANNED


_UNPLANNED = frozenset(
    {
        EndReason.RENEWAL_REFUSED,
        EndReason.DEADLINE_PASSED,
        EndReason.BACKEND_ERROR,
        EndReason.DUTY_FAILED,
        EndReason.DUTY_PANICKED,
        EndReason.EXPIRY,
    }
)


class MoveCause(str, enum.Enum):
    """Why a partition changed owner (:attr:`Move.cause`)."""

    HANDOFF = "handoff"
    DRAIN = "drain"
    LEAVE = "leave"
    REMOVAL = "removal"
    RELEASED = "released"
    EXPIRY = "expiry"
    """The previous owner's lease expired (a crash, a lost lease)."""
    NEW = "new"
    """The partition's first owner."""

    def __str__(self) -> str:
        return self.value

    @property
    def is_planned(self) -> bool:
        """Whether the move was a planned hand-over (not an expiry, not a first
        owner)."""
        return self not in (MoveCause.EXPIRY, MoveCause.NEW)


class ReplicaState(str, enum.Enum):
    """A replica's state in its group (:attr:`ReplicaStatus.state`)."""

    SETTLING = "settling"
    ACTIVE = "active"
    LEAVING = "leaving"
    DRAINING = "draining"
    AWAY = "away"

    def __str__(self) -> str:
        return self.value


class Role(str, enum.Enum):
    """An elector's role (:attr:`ElectorStatus.role`)."""

    STARTING = "starting"
    FOLLOWER = "follower"
    LEADER = "leader"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


class _Fields:
    """Reads a dict the core reported: a missing field raises, naming it."""

    def __init__(self, raw: Mapping[str, Any], what: str) -> None:
        if not isinstance(raw, Mapping):
            _drift(what, f"expected a dict, got {type(raw).__name__}")
        self._raw = raw
        self._what = what

    def __getitem__(self, key: str) -> Any:
        try:
            return self._raw[key]
        except KeyError:
            _drift(self._what, f"no field {key!r}")


_E = TypeVar("_E", bound=enum.Enum)


def _drift(what: str, why: str) -> Any:
    from .errors import LeaseholdError

    raise LeaseholdError(
        f"the Rust core reported a {what} this package cannot read ({why}): "
        "the package and its core are of different versions"
    )


def _enum(cls: type[_E], value: Any, what: str) -> _E:
    try:
        return cls(value)
    except ValueError:
        return _drift(what, f"unknown {cls.__name__} {value!r}")  # type: ignore[no-any-return]


def _time_ms(ms: int | None) -> datetime | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(frozen=True)
class PartitionOwner:
    """A partition's owner as Redis holds it (:meth:`GroupAdmin.owner`)."""

    partition: str
    owner: str | None
    """The owner's replica id; ``None`` while it has none."""
    fence: int
    """The fence of the owner's term (of the last term, when it has none)."""
    remaining: float | None
    """Seconds left on the owner's lease."""
    held_for: float | None
    """Seconds the owner has held it."""
    weight: int

    @classmethod
    def _of(cls, raw: Mapping[str, Any]) -> PartitionOwner:
        f = _Fields(raw, "partition owner")
        return cls(
            partition=f["partition"],
            owner=f["owner"],
            fence=f["fence"],
            remaining=f["remaining"],
            held_for=f["held_for"],
            weight=f["weight"],
        )


@dataclass(frozen=True)
class ReplicaStatus:
    """One replica of a group (:attr:`GroupStatus.members`)."""

    replica: str
    state: ReplicaState
    held: int
    """Partitions it holds, as it last reported."""
    session_left: float
    """Seconds left on its membership."""
    instance: str
    """Its process: ``host pid``."""
    address: str | None
    """Where it serves (``Coordinator(advertise=...)``), or ``None``."""
    drained: bool
    load: int
    """The weights of its partitions, summed."""
    capacity: int

    @classmethod
    def _of(cls, raw: Mapping[str, Any]) -> ReplicaStatus:
        f = _Fields(raw, "replica status")
        return cls(
            replica=f["replica"],
            state=_enum(ReplicaState, f["state"], "replica status"),
            held=f["held"],
            session_left=f["session_left"],
            instance=f["instance"],
            address=f["address"],
            drained=f["drained"],
            load=f["load"],
            capacity=f["capacity"],
        )


@dataclass(frozen=True)
class GroupStatus:
    """A whole group (:meth:`GroupAdmin.status`): every partition's owner, every
    replica's state. Read page by page, so not one instant's snapshot."""

    partitions: list[PartitionOwner]
    """Every partition of the set, by name."""
    members: list[ReplicaStatus]
    """Every replica of the group."""
    replicas: list[tuple[str, int | None]]
    """Each replica's id and the count it holds (``None`` while settling)."""
    list_version: int
    weighted: bool
    total_weight: int
    drained: list[str]
    preferences: dict[str, str]
    """Partition → the replica it is preferred on."""

    def owner(self, partition: str) -> PartitionOwner | None:
        """The row of ``partition``, or ``None`` if it is not in the set."""
        for row in self.partitions:
            if row.partition == partition:
                return row
        return None

    def member(self, replica: str) -> ReplicaStatus | None:
        """The status of ``replica``, or ``None`` if it is not a member."""
        for member in self.members:
            if member.replica == replica:
                return member
        return None

    @classmethod
    def _of(cls, raw: Mapping[str, Any]) -> GroupStatus:
        f = _Fields(raw, "group status")
        return cls(
            partitions=[PartitionOwner._of(row) for row in f["partitions"]],
            members=[ReplicaStatus._of(row) for row in f["members"]],
            replicas=[(str(r), held) for r, held in f["replicas"]],
            list_version=f["list_version"],
            weighted=f["weighted"],
            total_weight=f["total_weight"],
            drained=list(f["drained"]),
            preferences={str(p): str(r) for p, r in f["preferences"]},
        )


@dataclass(frozen=True)
class Move:
    """One change of owner from the group's ledger (:meth:`GroupAdmin.moves`)."""

    id: str
    """The ledger's id (``moves(after=move.id)`` reads on from it)."""
    partition: str
    from_: str | None
    """The previous owner (``None`` for a partition's first owner)."""
    to: str
    """The new owner."""
    cause: MoveCause
    old_fence: int | None
    new_fence: int
    ended_at: datetime | None
    """When the previous term ended (UTC)."""
    held_since: datetime | None
    """When the previous term began (UTC)."""
    started_at: datetime
    """When the new term began (UTC)."""
    unowned: float | None
    """Seconds the partition had no owner between the two terms."""
    state_bytes: int | None
    """The size of the state handed over, if any was."""

    @classmethod
    def _of(cls, raw: Mapping[str, Any]) -> Move:
        f = _Fields(raw, "move")
        started = _time_ms(f["started_ms"])
        assert started is not None
        return cls(
            id=f["id"],
            partition=f["partition"],
            from_=f["from"],
            to=f["to"],
            cause=_enum(MoveCause, f["cause"], "move"),
            old_fence=f["old_fence"],
            new_fence=f["new_fence"],
            ended_at=_time_ms(f["ended_ms"]),
            held_since=_time_ms(f["held_since_ms"]),
            started_at=started,
            unowned=f["unowned"],
            state_bytes=f["state_bytes"],
        )


@dataclass(frozen=True)
class LastTerm:
    """How an elector's last term ended (:attr:`ElectorStatus.last_term`)."""

    fence: int
    reason: EndReason
    detail: str
    """The reason in words (a failed duty's exception, ...)."""
    released: bool
    """Whether the lease was released (a follower took over at once)."""

    @classmethod
    def _of(cls, raw: Mapping[str, Any]) -> LastTerm:
        f = _Fields(raw, "last term")
        return cls(
            fence=f["fence"],
            reason=_enum(EndReason, f["reason"], "last term"),
            detail=f["detail"],
            released=f["released"],
        )


@dataclass(frozen=True)
class ElectorStatus:
    """An elector's state now (:meth:`Elector.status`)."""

    role: Role
    leader: str | None
    """The leader: this replica when leading, the holder a follower saw."""
    fence: int | None
    """This term's fence, while leading."""
    highest_fence: int
    """The highest fence this elector has seen (0 before it has seen one)."""
    last_error: str | None
    last_term: LastTerm | None
    stalls: int
    """Times the elector woke far later than it asked (its thread was blocked)."""

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @classmethod
    def _of(cls, raw: Mapping[str, Any]) -> ElectorStatus:
        f = _Fields(raw, "elector status")
        last_term = f["last_term"]
        return cls(
            role=_enum(Role, f["role"], "elector status"),
            leader=f["leader"],
            fence=f["fence"],
            highest_fence=f["highest_fence"],
            last_error=f["last_error"],
            last_term=None if last_term is None else LastTerm._of(last_term),
            stalls=f["stalls"],
        )
