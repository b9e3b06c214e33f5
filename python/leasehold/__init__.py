"""Leasehold: exactly one owner for each duty and each partition, using fenced
leases in Redis, for asyncio services, on the Rust core of the ``leasehold`` crates.

- :class:`Elector`: one leader for a duty; ``lead(lease)`` runs while it leads.
- :class:`Coordinator`: a group of replicas shares partitions, one owner each;
  ``handle(partition, lease)`` runs per owned partition.
- :class:`Lease`: a term: its ``fence``, ``check()``, ``remaining()``, ``lost()``;
  :class:`PartitionLease`, a partition's, adds ``partition``, ``hand_off``,
  ``handed_over``, ``report_load``.
- :class:`Router`: which replica owns each partition and where it serves, for
  clients outside the group; ``owner(partition)`` is a local lookup.
- :class:`GroupAdmin`, :class:`FencedWriter` (and its :class:`FencedBatch`), and the
  exceptions of :mod:`leasehold.errors`.
- The typed results of :mod:`leasehold.types`: :class:`GroupStatus`, :class:`Move`,
  :class:`ElectorStatus`, ... and the enums :class:`EndReason`, :class:`MoveCause`,
  :class:`ReplicaState`, :class:`Role`. Durations are float seconds.

Renewals run in Rust, off the event loop and without the GIL.
"""

from __future__ import annotations

import atexit

from . import _leasehold
from ._admin import GroupAdmin
from ._coordinator import Coordinator, View
from ._elector import Elector
from ._leasehold import Lease, PartitionLease, Route, version as _core_version
from ._router import RouteChange, RouteChanges, Router, RouterStatus
from ._writer import FencedBatch, FencedWriter
from .types import (
    ElectorStatus,
    EndReason,
    GroupStatus,
    LastTerm,
    Move,
    MoveCause,
    PartitionOwner,
    ReplicaState,
    ReplicaStatus,
    Role,
)
from .errors import (
    ConfigError,
    FenceRejected,
    GroupError,
    HandOffError,
    LeaseholdError,
    LoadError,
    RedisError,
    Stopped,
    StoreError,
    StoreUnavailable,
    TermOver,
    Timeout,
)

__version__: str = _core_version()

# From interpreter exit on, no Rust thread takes the GIL (one that did while Python
# finalizes would crash the process); this waits for those holding it.
atexit.register(_leasehold.finalize)

__all__ = [
    "Elector",
    "Coordinator",
    "View",
    "Lease",
    "PartitionLease",
    "GroupAdmin",
    "Router",
    "Route",
    "RouteChange",
    "RouteChanges",
    "RouterStatus",
    "FencedWriter",
    "FencedBatch",
    "EndReason",
    "MoveCause",
    "ReplicaState",
    "Role",
    "GroupStatus",
    "ReplicaStatus",
    "PartitionOwner",
    "Move",
    "ElectorStatus",
    "LastTerm",
    "LeaseholdError",
    "ConfigError",
    "StoreError",
    "StoreUnavailable",
    "RedisError",
    "TermOver",
    "Stopped",
    "FenceRejected",
    "HandOffError",
    "LoadError",
    "GroupError",
    "Timeout",
]
