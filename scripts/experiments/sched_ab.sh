#!/usr/bin/env bash
# A/B of the local services' CPU scheduling inside `docpipe run` (issue 24's idle cores): A = as
# started (SCHED_OTHER), B = Postgres, RabbitMQ and SeaweedFS (every thread) under SCHED_IDLE, so
# that they run only on a core the model's threads leave idle. Usage:
# scripts/experiments/sched_ab.sh NDOCS A B B A   (the first NDOCS PDFs of
# ../shared/corpus/contracts by name, each run in a fresh bucket; the CPU's user/system/idle from
# /proc/stat over each run, model load included, then the run's stage table). Leaves the services
# as A. Needs root (or CAP_SYS_NICE) to give SCHED_OTHER back.
set -euo pipefail
cd "$(dirname "$0")/../.."
source "${DOCPIPE_HOME:-$HOME/.cache/docpipe}/run/env.sh"
n=$1; shift
mapfile -t files < <(find ../shared/corpus/contracts -maxdepth 1 -name '*.pdf' | sort | head -n "$n")
cpu() { awk '/^cpu /{print $2+$3, $4, $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
services() { pgrep -f 'postgres|beam.smp|/weed ' || true; }
policy() { for p in $(services); do chrt -a "$1" -p 0 "$p" >/dev/null 2>&1 || true; done; }
trap 'policy -o' EXIT
for s in "$@"; do
  tag=ab$(date +%s)
  target/debug/docpipe put --bucket "$tag" "${files[@]}" >/dev/null
  if [ "$s" = B ]; then policy -i; else policy -o; fi
  read -r u0 s0 i0 t0 < <(cpu)
  target/debug/docpipe run --bucket "$tag" --timings > /tmp/ab-$tag-$s.txt 2>&1
  read -r u1 s1 i1 t1 < <(cpu)
  policy -o
  echo "== $s $tag user $(( 100*(u1-u0)/(t1-t0) ))% sys $(( 100*(s1-s0)/(t1-t0) ))% idle $(( 100*(i1-i0)/(t1-t0) ))%"
  sed -n '/where the time went/,$p' /tmp/ab-$tag-$s.txt
done
