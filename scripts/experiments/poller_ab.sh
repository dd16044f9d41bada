#!/usr/bin/env bash
# Does cpu_by_process.py, polling /proc beside the run as `make bench-pipeline` does, slow the
# pipeline? Usage: scripts/experiments/poller_ab.sh NDOCS P N ...   (P: the poller runs beside
# `docpipe run`, its table in /tmp/poll-<epoch seconds>.txt; N: no poller; the first NDOCS contracts of
# ../shared/corpus/contracts by name, a fresh bucket each; what each run prints: ab_lib.sh).
source "$(dirname "$0")/ab_lib.sh" "$1"
shift
for s in "$@"; do
  if [ "$s" = P ]; then
    python3 scripts/experiments/cpu_by_process.py > "/tmp/poll-$(date +%s).txt" &
    poller=$!
    ab_run "$s"
    kill "$poller"; wait "$poller" || true
  else
    ab_run "$s"
  fi
done
