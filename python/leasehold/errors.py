"""The exceptions leasehold raises.

Every one is a :class:`LeaseholdError`; each also refines the built-in exception a
caller may already catch (``ValueError`` for bad input, ``ConnectionError`` for
Redis failures, ``TimeoutError`` for a wait that ran out).
"""

from __future__ import annotations

__all__ = [
    "LeaseholdError",
    "ConfigError",
    "RedisError",
    "TermOver",
    "Stopped",
    "FenceRejected",
    "HandOffError",
    "LoadError",
    "GroupError",
    "Timeout",
]


class LeaseholdError(Exception):
    """Base class of every leasehold exception."""


class ConfigError(LeaseholdError, ValueError):
    """A bad argument: a name, a URL, a duration or a combination of settings.

    Raised at construction, before anything touches Redis.
    """


class RedisError(LeaseholdError, ConnectionError):
    """Redis could not be reached in time, or answered with an error."""


class TermOver(LeaseholdError):
    """The term is over, or its local deadline has passed (:meth:`Lease.check`).

    Stop the side effect: another replica may own the duty or partition now.
    """


class Stopped(LeaseholdError):
    """The elector or coordinator is not running (not started yet, or stopped)."""


class FenceRejected(LeaseholdError):
    """A fenced write was refused: the key has accepted a write of a newer term.

    The writer is a deposed owner and must stop.
    """


class HandOffError(LeaseholdError, ValueError):
    """Hand-off state was refused: larger than 1 MiB, or the lease is gone."""


class LoadError(LeaseholdError, ValueError):
    """A load report was refused: it must be a finite number, zero or more."""


class GroupError(LeaseholdError):
    """A group refused an operation: no such group, a partition already present or
    not in the set, the last active replica, ..."""


class Timeout(LeaseholdError, TimeoutError):
    """A wait with a timeout ran out: :meth:`Router.ready` before the router's table
    was read (the message says why: Redis not reached, or no such group yet)."""
