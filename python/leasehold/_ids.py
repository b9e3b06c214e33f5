"""Default replica ids."""

from __future__ import annotations

import os
import socket


def default_replica() -> str:
    """``<hostname>-<pid>``: unique on a host, and names the process an operator
    would look for."""
    return f"{socket.gethostname()}-{os.getpid()}"
