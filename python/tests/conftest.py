"""Fixtures: a throwaway redis-server for the suite, unique names per test."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator

import pytest

INSTALL = "install Debian's redis-server package: apt-get install redis-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server on a free loopback port, killed at the end."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(f"redis-server not found on PATH: {INSTALL}", pytrace=False)
        self.dir = tempfile.mkdtemp(prefix="leasehold-pytest-")
        self.port = free_port()
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/"
        deadline = time.monotonic() + 10
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"redis-server on port {self.port} did not start", pytrace=False)
            time.sleep(0.02)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args: str) -> bytes:
        """One command over a raw connection (RESP), its raw reply."""
        payload = f"*{len(args)}\r\n".encode()
        for arg in args:
            data = arg.encode()
            payload += b"$%d\r\n%s\r\n" % (len(data), data)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(payload)
            return sock.recv(65536)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def name() -> str:
    """A duty or group name no other test uses."""
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def rust_bench() -> str:
    """The `leasehold-bench` binary (its hidden `partition-child` mode is a Rust
    replica): $LEASEHOLD_BENCH, or the workspace's target/debug build."""
    explicit = os.environ.get("LEASEHOLD_BENCH")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    for candidate in filter(None, [explicit, os.path.join(target, "debug", "leasehold-bench")]):
        if os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "the Rust replica binary leasehold-bench was not found: build it with "
        "`cargo build -p leasehold-bench` (or set LEASEHOLD_BENCH to its path)",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def rust_stream_consumer() -> str:
    """The Rust example `stream_consumer` (examples/stream_consumer.rs), which the Python
    example python/examples/stream_consumer.py shares a group with:
    $LEASEHOLD_STREAM_CONSUMER, or the workspace's target/debug build."""
    explicit = os.environ.get("LEASEHOLD_STREAM_CONSUMER")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    built = os.path.join(target, "debug", "examples", "stream_consumer")
    for candidate in filter(None, [explicit, built]):
        if os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "the Rust example stream_consumer was not found: build it with `cargo build -p "
        "leasehold-example-stream-consumer --example stream_consumer` (or set "
        "LEASEHOLD_STREAM_CONSUMER to its path)",
        pytrace=False,
    )
