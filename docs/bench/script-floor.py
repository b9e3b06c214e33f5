#!/usr/bin/env python3
"""What a Lua script costs this machine's redis-server at the rate a steady group sends
its ticks, whatever the script does: a diagnostic for issue 20's tick target, not a
figure the docs quote as Leasehold's (those come from `leasehold-bench load`).

Starts its own redis-server on a free loopback port, seeds ten small keys shaped like a
group of 10 replicas, and sends each script with EVALSHA from one connection, either
back to back (warm caches) or at 25 a second (a steady group of 10 replicas at a 2 s
lease sends 25 ticks a second), with every command in the slow log (threshold 0; in Redis 7 the calls a script makes are
logged too, and only the EVALSHA entries are counted). The
figure is the slow log's duration: the server's own time for the call.

  python3 docs/bench/script-floor.py > docs/bench/script-floor.txt

Scripts: `return 1` (no call), `plain ZADD` (not a script: one ZADD), `4 calls` (TIME,
HMGET of 17 fields, ZRANGEBYSCORE LIMIT 2, ZADD GT: what any heartbeat must do) and
`heartbeat` (the same reads and writes as heartbeat.lua: 13 calls, the same reply).
Run it on a quiet machine.
"""
import socket
import subprocess
import sys
import time

HEARTBEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[4], 'count', 'version', 'digest', 'grant_after',
    'life', 'sver', 'lease', 'fmax', 'origin', 'weighted', 'total', 'wver', 'rcount',
    'inc', 'server', 'rver', 'checked')
local first = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
if ARGV[9] == 'all' then
  local cur = redis.call('HGET', KEYS[2], ARGV[1])
  local holder = redis.call('HGET', KEYS[10], ARGV[1]) or cur
  local st = redis.call('HGET', KEYS[3], ARGV[1])
  local a = redis.call('ZCARD', KEYS[6]) + redis.call('HLEN', KEYS[7])
  local drained = redis.call('HEXISTS', KEYS[8], ARGV[1])
  local free = redis.call('ZCARD', KEYS[5])
  local top = redis.call('ZREVRANGE', KEYS[9], 0, 0, 'WITHSCORES')
end
redis.call('ZADD', KEYS[1], 'GT', now + tonumber(ARGV[5]), ARGV[1])
return {m, 0, 0, 1, 5, 0}
"""


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed(c):
    keys = [f"k{i}" for i in range(1, 11)]
    c.cmd("DEL", *keys)
    for i in range(1, 11):
        c.cmd("ZADD", "k1", 9999999999999 + i, f"replica-{i}")
        c.cmd("HSET", "k2", f"replica-{i}", f"session-token-{i:020}")
        c.cmd("HSET", "k3", f"replica-{i}", "active")
        c.cmd("HSET", "k10", f"replica-{i}", f"process-token-{i:020}")
    c.cmd("HSET", "k4", "count", 10000, "version", 5, "digest", "abcdef0123456789",
          "grant_after", 0, "life", 123, "sver", 4, "lease", 2000, "fmax", 123456789,
          "origin", "x", "weighted", 0, "total", 10000, "wver", 3, "rcount", 10,
          "inc", "i:123:456", "server", "s:abc", "rver", 77, "checked", 0)
    for i in range(100):
        c.cmd("ZADD", "k9", 1, f"p{i}")
    return keys


def measure(c, keys, what, rate, n):
    c.cmd("SLOWLOG", "RESET")
    args = ["replica-3", "process-token", "session-token", "active", 2000,
            "i:123:456", "s:abc", "i:123:456/s:abc/77"]
    if what == "plain ZADD":
        call = lambda i: c.cmd("ZADD", "k1", "GT", 99999999999999 + i, "replica-3")
        name = b"ZADD"
    else:
        body = {"return 1": "return 1", "4 calls": HEARTBEAT, "heartbeat": HEARTBEAT}[what]
        sha = c.cmd("SCRIPT", "LOAD", body)
        mode = "all" if what == "heartbeat" else "few"
        call = lambda i: c.cmd("EVALSHA", sha, len(keys), *keys, *args, mode)
        name = b"EVALSHA"
    for i in range(n):
        call(i)
        if rate:
            time.sleep(1 / rate)
    log = c.cmd("SLOWLOG", "GET", -1)
    d = sorted(e[2] for e in log if e[3][0].upper() == name)
    return d[len(d) // 2], d[int(len(d) * 0.99)], len(d)


def main():
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--slowlog-log-slower-than", "0",
         "--slowlog-max-len", "100000"],
        stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                c = Conn(port)
                c.cmd("PING")
                break
            except (ConnectionRefusedError, RuntimeError):
                time.sleep(0.05)
        keys = seed(c)
        print(f"# redis-server {c.cmd('INFO', 'server').split(b'redis_version:')[1].split()[0].decode()}, "
              f"{time.strftime('%Y-%m-%d')}; server time per call from the slow log, µs")
        print("# script        rate        p50   p99   calls")
        for rnd in range(3):
            for what in ["return 1", "plain ZADD", "4 calls", "heartbeat"]:
                for rate, n in [(0, 3000), (25, 250)]:
                    p50, p99, k = measure(c, keys, what, rate, n)
                    label = "back to back" if rate == 0 else "25 a second"
                    print(f"{what:<15} {label:<12} {p50:>4}  {p99:>4}  {k}")
                    sys.stdout.flush()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
