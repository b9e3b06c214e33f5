#!/usr/bin/env bash
# The wide-fleet load benchmark with the server on a core of its own (issue 20's targets
# assume "the server would sit on its own core"): a throwaway redis-server pinned to the
# last CPU, the bench and every replica process pinned to the others, and
# `leasehold-bench load --redis-url` pointed at the server. Writes
# docs/bench/<name>.json as run.sh does (the command line recorded in it includes the
# pinning).
#
#   docs/bench/pinned.sh load-wide-pinned
#
# Needs `taskset` (util-linux) and at least 2 CPUs. Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p leasehold-bench
bench=target/release/leasehold-bench

declare -A runs=(
  [load-wide-pinned]="load --partitions 10000 --replicas 10,200 --replicas-per-process 10 --lease-ms 2000 --seconds 10 --replica-nice 10"
)
cpus=$(nproc)
[ "$cpus" -ge 2 ] || { echo "pinned.sh needs at least 2 CPUs" >&2; exit 1; }
server_cpu=$((cpus - 1))
client_cpus="0-$((cpus - 2))"

for name in "${@:-load-wide-pinned}"; do
  args=${runs[$name]:?"unknown benchmark $name (one of: ${!runs[*]})"}
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  dir=$(mktemp -d)
  taskset -c "$server_cpu" redis-server --port "$port" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$dir" --daemonize no > "$dir/log" 2>&1 &
  server=$!
  trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
  until redis-cli -p "$port" ping > /dev/null 2>&1; do sleep 0.05; done
  cmd="$args --redis-url redis://127.0.0.1:$port"
  echo "== $name: taskset -c $client_cpus leasehold-bench $cmd (redis-server on CPU $server_cpu)" >&2
  lines=$(taskset -c "$client_cpus" $bench $cmd)
  kill $server; wait $server 2>/dev/null || true
  trap - EXIT; rm -rf "$dir"
  {
    printf '{"name":"%s","command":"taskset -c %s leasehold-bench %s (redis-server: taskset -c %s redis-server --save \\"\\" --appendonly no)","date":"%s","reports":[' \
      "$name" "$client_cpus" "$args --redis-url redis://127.0.0.1:PORT" "$server_cpu" "$(date -u +%Y-%m-%d)"
    printf '%s\n' "$lines" | grep '^{' | paste -sd, -
    printf ']}\n'
  } > "docs/bench/$name.json"
done
