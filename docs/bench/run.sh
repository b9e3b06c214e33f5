#!/usr/bin/env bash
# Re-runs the benchmarks whose figures README.md and docs/*.md quote, one at a time,
# and stores each command's reports in docs/bench/<name>.json (every JSON line it
# printed, the last one being the summary). Then `leasehold-bench tables --write`
# regenerates the tables from them.
#
#   docs/bench/run.sh            # everything (about 200 minutes on a 2-core machine)
#   docs/bench/run.sh load-10k   # one of them, by name
#
# Run it on a quiet machine: nothing else building or benchmarking.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p leasehold-bench
bench=target/release/leasehold-bench

declare -A runs=(
  [failover]="failover --lease-ms 1000 --runs 10"
  [handover]="handover --lease-ms 1000 --runs 10"
  [rebalance-64]="rebalance --partitions 64 --replicas 4 --lease-ms 2000 --runs 5"
  [rebalance-10k]="rebalance --partitions 10000 --replicas 10 --lease-ms 2000 --replica-nice 10"
  [rebalance-10k-budget]="rebalance --partitions 10000 --replicas 10 --lease-ms 2000 --replica-nice 10 --move-budget 100"
  [load-1k-4]="load --partitions 1000 --replicas 4 --lease-ms 1000 --seconds 10"
  [load-10k]="load --partitions 1000,10000 --replicas 10 --lease-ms 2000 --seconds 10 --runs 10 --replica-nice 10"
  [load-10k-unniced]="load --partitions 10000 --replicas 10 --lease-ms 2000 --seconds 10 --runs 3"
  [load-100k]="load --partitions 100000 --replicas 10 --lease-ms 10000 --seconds 10 --runs 3 --replica-nice 10"
  [load-wide]="load --partitions 10000 --replicas 10,100,200 --replicas-per-process 10 --lease-ms 2000 --seconds 10 --replica-nice 10"
  [rebalance-zipf]="rebalance --partitions 64 --replicas 4 --lease-ms 2000 --weights zipf"
  [rebalance-zipf-count]="rebalance --partitions 64 --replicas 4 --lease-ms 2000 --weights zipf --count-only"
  [rebalance-capacities]="rebalance --partitions 64 --replicas 4 --lease-ms 2000 --capacities 1,1,2,2"
  # Weights from measured load (issue 24): the load mode, then static weights, then
  # count only, each for 300 s after a 30 s settle (about 17 minutes each).
  [rebalance-load-shifting]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load shifting --seconds 300"
  [rebalance-load-stationary]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load stationary --seconds 300"
  # The load mode alone (about 6 minutes): the figure issue 24 targets.
  [rebalance-load-stationary-load]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load stationary --seconds 300 --modes load"
  # Other seeds (other tenants hot, other shifts): the load mode alone.
  [rebalance-load-shifting-seed7]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load shifting --seconds 300 --modes load --seed 7"
  [rebalance-load-shifting-seed1]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load shifting --seconds 300 --modes load --seed 1"
  [rebalance-load-shifting-seed2]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load shifting --seconds 300 --modes load --seed 2"
  [rebalance-load-shifting-seed3]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load shifting --seconds 300 --modes load --seed 3"
  # Loads that answer to moves (issue 45): stationary arrival rates into queues whose
  # owners report the throughput they achieve, so a catch-up after a move or the cold
  # start looks like a step; the load mode alone (about 6 minutes).
  [rebalance-load-feedback]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load feedback --seconds 300 --modes load"
  [rebalance-load-feedback-seed7]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load feedback --seconds 300 --modes load --seed 7"
  [rebalance-load-feedback-seed1]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load feedback --seconds 300 --modes load --seed 1"
  [rebalance-load-feedback-seed2]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load feedback --seconds 300 --modes load --seed 2"
  [rebalance-load-feedback-seed3]="rebalance-load --partitions 64 --replicas 4 --lease-ms 2000 --load feedback --seconds 300 --modes load --seed 3"
  [rolling]="rolling --partitions 64 --replicas 4 --lease-ms 2000"
  [rolling-paced]="rolling --partitions 64 --replicas 4 --lease-ms 2000 --paced"
  [rolling-sticky]="rolling --partitions 64 --replicas 4 --lease-ms 2000 --sticky --rejoin-grace-ms 20000"
  [rolling-add]="rolling --partitions 64 --replicas 4 --lease-ms 2000 --add-partitions 8"
  [rolling-handoff]="rolling --partitions 64 --replicas 4 --lease-ms 2000 --hand-off-bytes 4096"
  # A deploy under a termination grace period (issue 48): every replica of a 10,000
  # partition group leaves with shutdown_within(5 s), handing 4 KiB per partition on.
  [rolling-10k-leave]="rolling --partitions 10000 --replicas 10 --lease-ms 2000 --replica-nice 10 --hand-off-bytes 4096 --leave-within-ms 5000"
  [rebalance-handoff]="rebalance --partitions 64 --replicas 4 --lease-ms 2000 --runs 5 --hand-off-bytes 4096"
  [rebalance-handoff-warm]="rebalance --partitions 64 --replicas 4 --lease-ms 2000 --runs 5 --hand-off-bytes 4096 --prepare"
  [rebalance-10k-handoff]="rebalance --partitions 10000 --replicas 10 --lease-ms 2000 --replica-nice 10 --hand-off-bytes 4096"
  [add]="add --partitions 64 --replicas 4 --lease-ms 2000 --adds 20"
  # Routers (issue 57): a client's table of owners, kept by push, under faults.
  [route-100]="route --partitions 64 --replicas 4 --lease-ms 2000 --routers 100 --seconds 60"
  [route-1000]="route --partitions 64 --replicas 4 --lease-ms 2000 --routers 1000 --seconds 60"
  [stall]="stall --lease-ms 1000"
  [chaos]="chaos --replicas 5 --partitions 32 --lease-ms 1000 --seconds 600 --seed 42"
  [simulate]="simulate --seeds 20000"
  [failover-250]="failover --lease-ms 250 --runs 20"
  [failover-250-dedicated]="failover --lease-ms 250 --runs 20 --dedicated"
  [soak-250]="soak --lease-ms 250 --seconds 600 --replicas 3 --saturate"
  [group-500-rebalance]="rebalance --partitions 1000 --replicas 4 --lease-ms 500 --runs 3"
  [group-500-load]="load --partitions 1000 --replicas 4 --lease-ms 500 --seconds 600"
  [soak-250-dedicated]="soak --lease-ms 250 --seconds 600 --replicas 3 --dedicated --saturate"
)
# The same on TLS, Sentinel and Cluster set-ups the bench starts itself.
for t in tls sentinel cluster; do
  runs[failover-$t]="${runs[failover]} --topology $t"
  runs[handover-$t]="${runs[handover]} --topology $t"
  runs[load-1k-4-$t]="${runs[load-1k-4]} --topology $t"
done
runs[rebalance-64-cluster]="${runs[rebalance-64]} --topology cluster"
# Failovers of the servers that lose the last writes (issue 19): the primary is cut off
# from its replicas before the grants, then killed. A fresh topology per run, and a
# lease longer than the failover takes (2-4 s), or no old holder could still be
# entitled when the replica is promoted. About 25-40 s per failover run, 45-60 s per
# rebalance run.
for t in sentinel cluster; do
  runs[failover-$t-lossy]="failover-lossy --topology $t --lease-ms 10000 --runs 20"
done
runs[rebalance-sentinel-lossy]="rebalance-lossy --topology sentinel --partitions 64 --replicas 4 --lease-ms 10000 --settle-ms 2000 --runs 20"
runs[rebalance-cluster-lossy]="rebalance-lossy --topology cluster --partitions 64 --replicas 4 --lease-ms 10000 --settle-ms 2000 --runs 10"
# What min_replicas_acked(1) costs a hand-over on a healthy Sentinel pair.
runs[handover-sentinel-acked]="${runs[handover]} --topology sentinel --min-replicas-acked 1"
order=(failover handover rebalance-64 rebalance-10k rebalance-10k-budget load-1k-4 load-10k load-10k-unniced load-100k load-wide rebalance-zipf rebalance-zipf-count rebalance-capacities rebalance-load-shifting rebalance-load-stationary rebalance-load-stationary-load rebalance-load-shifting-seed7 rebalance-load-shifting-seed1 rebalance-load-shifting-seed2 rebalance-load-shifting-seed3 rebalance-load-feedback rebalance-load-feedback-seed7 rebalance-load-feedback-seed1 rebalance-load-feedback-seed2 rebalance-load-feedback-seed3 rolling rolling-paced rolling-sticky rolling-add rolling-handoff rolling-10k-leave rebalance-handoff rebalance-handoff-warm rebalance-10k-handoff add stall chaos simulate
  failover-250 failover-250-dedicated soak-250 soak-250-dedicated group-500-rebalance group-500-load
  failover-tls failover-sentinel failover-cluster handover-tls handover-sentinel handover-cluster
  load-1k-4-tls load-1k-4-sentinel load-1k-4-cluster rebalance-64-cluster
  failover-sentinel-lossy failover-cluster-lossy rebalance-sentinel-lossy rebalance-cluster-lossy
  handover-sentinel-acked)
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${order[@]}")
for name in "${wanted[@]}"; do
  args=${runs[$name]:?"unknown benchmark $name (one of: ${order[*]})"}
  echo "== $name: leasehold-bench $args" >&2
  lines=$($bench $args)
  {
    printf '{"name":"%s","command":"leasehold-bench %s","date":"%s","reports":[' \
      "$name" "$args" "$(date -u +%Y-%m-%d)"
    printf '%s\n' "$lines" | grep '^{' | paste -sd, -
    printf ']}\n'
  } > "docs/bench/$name.json"
done
