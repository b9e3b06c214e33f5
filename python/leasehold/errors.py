"""The exceptions leasehold raises.

Every one is a :class:`LeaseholdError`; most also refine the built-in exception a
caller may already catch (``ValueError`` for bad input, ``ConnectionError`` for a
Redis that cannot be reached, ``TimeoutError`` for a wait that ran out).

The names do not clash with redis-py's: Redis failures are :class:`StoreError`
(``retryable`` says whether the same call may succeed again) and its subclass
:class:`StoreUnavailable` (the retryable ones). ``RedisError`` is a deprecated alias
of :class:`StoreError`.
"""

from __future__ import annotations

__all__ = [
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


class LeaseholdError(Exception):
    """Base class of every leasehold exception."""


class ConfigError(LeaseholdError, ValueError):
    """A bad argument: a name, a URL, a duration or a combination of settings.

    Raised at construction, before anything touches Redis.
    """


class StoreError(LeaseholdError):
    """Redis answered with an error, or could not be reached in time.

    Attributes:
        retryable: Whether the same call may succeed without anyone changing
            anything (a timeout, a lost connection, a server that cannot serve right
            now): then it is a :class:`StoreUnavailable`. ``False`` for a key of the
            wrong type (``WRONGTYPE``), a refused command (ACL, ``NOPERM``), a reply
            of the wrong shape: retrying cannot fix those.
    """

    retryable: bool

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class StoreUnavailable(StoreError, ConnectionError):
    """Redis could not be reached in time, or cannot serve right now (``LOADING``,
    ``READONLY`` from a demoted primary, ``CLUSTERDOWN``, too few replicas
    acknowledged): retryable (:attr:`retryable` is ``True``)."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message, retryable=retryable)


RedisError = StoreError
"""Deprecated: the old name of :class:`StoreError` (it shared its name with
redis-py's base exception)."""


class TermOver(LeaseholdError):
    """The term is over, or its local deadline has passed (:meth:`Lease.check`).

    Stop the side effect: another replica may own the duty or partition now.
    """


class Stopped(LeaseholdError):
    """The elector or coordinator is not running (not started yet, or stopped)."""


class FenceRejected(LeaseholdError):
    """A fenced write was refused: the key has accepted a write of a newer term.

    The writer is a deposed owner and must stop.

    Attributes:
        fence: The fence the write carried.
        highest: The highest fence the key (of a batch: its keys) has seen.
    """

    fence: int | None
    highest: int | None

    def __init__(
        self, message: str, *, fence: int | None = None, highest: int | None = None
    ) -> None:
        super().__init__(message)
        self.fence = fence
        self.highest = highest


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
