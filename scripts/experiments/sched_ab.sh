#!/usr/bin/env bash
# A/B of the local services' CPU scheduling inside `docpipe run` (issue 24's idle cores): A = as
# started (SCHED_OTHER), B = Postgres, RabbitMQ and SeaweedFS (every thread) under SCHED_IDLE, so
# that they run only on a core the model's threads leave idle. Usage:
# scripts/experiments/sched_ab.sh NDOCS A B B A   (the first NDOCS PDFs of
# ../shared/corpus/contracts by name, each run in a fresh bucket; what each run prints:
# ab_lib.sh). Leaves the services as A. Needs root (or CAP_SYS_NICE) to give SCHED_OTHER back.
source "$(dirname "$0")/ab_lib.sh" "$1"
shift
services() { pgrep -f 'postgres|beam.smp|/weed ' || true; }
policy() { for p in $(services); do chrt -a "$1" -p 0 "$p" >/dev/null 2>&1 || true; done; }
trap 'policy -o' EXIT
for s in "$@"; do
  if [ "$s" = B ]; then policy -i; else policy -o; fi
  ab_run "$s"
  policy -o
done
