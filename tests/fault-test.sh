#!/usr/bin/env bash
# `make fault-test`: inject faults into runs of real documents through separate ingest, worker
# and aggregator processes, against the real services. After each fault every document must
# end `done` or `failed` with a reason, no chunk may be missing or duplicated, no process may
# crash (except the one we kill), and the run must finish within FAULT_TIMEOUT_S.
# Prints a table; the last line is `lost N duplicated M`. Exit status 1 if anything is off.
# Expects the services' environment (scripts/services.sh env) and a built target/debug/docpipe.
set -uo pipefail
cd "$(dirname "$0")/.."

BIN=${DOCPIPE_BIN:-target/debug/docpipe}
TIMEOUT=${FAULT_TIMEOUT_S:-240}
CORPUS=${FAULT_CORPUS:-../shared/corpus/contracts}
work=$(mktemp -d /tmp/docpipe-fault.XXXXXX)
trap 'rm -rf "$work"' EXIT
export DOCPIPE_LOG=${DOCPIPE_LOG:-info,lapin=warn,sqlx=warn}
sql() { psql "$DOCPIPE_DATABASE_URL" -XAtq -c "$1"; }

# fixtures: the sample contracts, a truncated upload, and two real contracts when present
for f in samples/*.txt; do "$BIN" render-pdf "$f" "$work/$(basename "${f%.txt}").pdf"; done
printf '%%PDF-1.7\ncut off in transit' > "$work/truncated.pdf"
if [ -f "$CORPUS/MANIFEST.tsv" ]; then
  awk -F'\t' 'NR > 1 && $6 <= 8 && $9 == "no" && $10 == "no" { print $1 }' "$CORPUS/MANIFEST.tsv" | head -n 2 \
    | while read -r f; do cp "$CORPUS/$f" "$work/"; done
fi

# each role serves /metrics, /healthz and /readyz on its own loopback port
WORKER_PORT=${FAULT_WORKER_PORT:-19464} AGG_PORT=${FAULT_AGG_PORT:-19465}
start_role() {  # role prefix logfile metrics-port → pid
  DOCPIPE_QUEUE_PREFIX=$2 DOCPIPE_METRICS_ADDR=127.0.0.1:$4 "$BIN" "$1" >>"$3" 2>&1 &
  echo $!
}
readyz() { curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/readyz"; }

scenario() {  # name inject-function [pdf-dir [timeout-s]]
  local name=$1 inject=$2 dir=${3:-$work} timeout=${4:-$TIMEOUT} tag
  tag=$name-$(date +%s)-$$
  local prefix=fault-$tag bucket=fault-$tag log=$work/$name.log
  if ! "$BIN" put --bucket "$bucket" "$dir"/*.pdf >/dev/null 2>>"$log"; then
    printf '%-18s upload failed, see %s\n' "$name" "$log"
    fail "$name" "upload failed" "$log"
    return
  fi
  AGG=$(start_role aggregate "$prefix" "$log" "$AGG_PORT")
  WORKER=$(start_role worker "$prefix" "$log" "$WORKER_PORT")
  local run_id
  run_id=$(DOCPIPE_QUEUE_PREFIX=$prefix DOCPIPE_METRICS_ADDR=off "$BIN" ingest --bucket "$bucket" 2>>"$log" | sed -n 's/.*"run_id": "\(.*\)".*/\1/p')
  if [ -z "$run_id" ]; then
    printf '%-18s ingest failed, see %s\n' "$name" "$log"
    fail "$name" "ingest failed" "$log"
    kill -TERM "$AGG" "$WORKER" 2>/dev/null; wait "$AGG" "$WORKER" 2>/dev/null
    return
  fi
  local t0=$SECONDS crashed=0
  $inject "$prefix" "$log"
  local pending=1
  while [ $((SECONDS - t0)) -lt "$timeout" ]; do
    pending=$(sql "SELECT count(*) FROM documents WHERE run_id = '$run_id' AND status NOT IN ('done', 'failed')" 2>/dev/null || echo 1)
    [ "$pending" = 0 ] && break
    sleep 1
  done
  local secs=$((SECONDS - t0))
  for pid in "$AGG" "$WORKER"; do kill -0 "$pid" 2>/dev/null || crashed=$((crashed + 1)); done
  kill -TERM "$AGG" "$WORKER" 2>/dev/null; wait "$AGG" "$WORKER" 2>/dev/null
  local docs lost dup noreason
  docs=$(sql "SELECT count(*) FROM documents WHERE run_id = '$run_id'")
  # lost: documents not finished, and chunks of done documents that are not stored
  lost=$(sql "SELECT (SELECT count(*) FROM documents WHERE run_id = '$run_id' AND status NOT IN ('done', 'failed'))
              + coalesce((SELECT sum(d.chunk_count - (SELECT count(*) FROM chunks c WHERE c.document_id = d.id))
                          FROM documents d WHERE d.run_id = '$run_id' AND d.status = 'done'), 0)")
  dup=$(sql "SELECT count(*) - count(DISTINCT (document_id, chunk_index)) FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE d.run_id = '$run_id'")
  noreason=$(sql "SELECT count(*) FROM documents WHERE run_id = '$run_id' AND status = 'failed' AND coalesce(error, '') = ''")
  printf '%-18s %5s %5s %10s %8s %8s %6s\n' "$name" "$docs" "$lost" "$dup" "$noreason" "$crashed" "$secs"
  TOTAL_LOST=$((TOTAL_LOST + lost)); TOTAL_DUP=$((TOTAL_DUP + dup))
  [ "$lost" = 0 ] || fail "$name" "$lost chunks or documents lost" "$log"
  [ "$dup" = 0 ] || fail "$name" "$dup chunks duplicated" "$log"
  [ "$noreason" = 0 ] || fail "$name" "$noreason failed documents without a reason" "$log"
  [ "$crashed" = 0 ] || fail "$name" "$crashed of aggregator and worker exited before the end" "$log"
  [ "$pending" = 0 ] || fail "$name" "$pending documents unfinished after ${timeout}s" "$log"
  LAST_RUN=$run_id
  for q in chunks chunks.dead results results.dead poison; do rabbitmqctl -q delete_queue "$prefix.$q" >/dev/null 2>&1; done
  rabbitmqctl -q delete_exchange "$prefix.dead" >/dev/null 2>&1
}

# fail SCENARIO WHY LOG: remember why the suite fails, with the end of that scenario's log
REASONS=()
fail() {
  FAILED=1
  REASONS+=("$1: $2")
  if [ -f "$3" ]; then
    cp "$3" "${FAULT_LOG_DIR:-/tmp}/docpipe-fault-$1.log" 2>/dev/null || true
    REASONS+=("$(tail -n 8 "$3" | cut -c1-240 | sed 's/^/    /')")
  fi
}

none() { :; }
kill9_worker() {
  sleep 4
  kill -9 "$WORKER"
  wait "$WORKER" 2>/dev/null
  WORKER=$(start_role worker "$1" "$2" "$WORKER_PORT")
}
# also: the worker's /readyz answers 503 while the broker is down and 200 once it reconnected
restart_rabbitmq() {
  sleep 4
  rabbitmqctl stop_app >/dev/null 2>&1
  local down=000 up=000 i
  for i in $(seq 10); do down=$(readyz "$WORKER_PORT"); [ "$down" = 503 ] && break; sleep 1; done
  sleep 1
  rabbitmqctl start_app >/dev/null 2>&1
  for i in $(seq 90); do up=$(readyz "$WORKER_PORT"); [ "$up" = 200 ] && break; sleep 1; done
  echo "restart-rabbitmq: worker /readyz $down while the broker was down, $up after" >>"$2"
  if [ "$down" != 503 ] || [ "$up" != 200 ]; then
    echo "restart-rabbitmq: worker /readyz answered $down during the outage and $up after (want 503, then 200)"
    fail restart-rabbitmq "worker /readyz answered $down during the outage and $up after (want 503, then 200)" "$2"
  fi
}
poison_message() {
  sleep 2
  echo '{"schema": 2, "not": "a chunk"}' | DOCPIPE_QUEUE_PREFIX=$1 "$BIN" publish-raw "$1.chunks" >>"$2" 2>&1
  printf 'garbage, not JSON' | DOCPIPE_QUEUE_PREFIX=$1 "$BIN" publish-raw "$1.results" >>"$2" 2>&1
}
restart_postgres() {
  sleep 4
  scripts/services.sh stop-postgres >/dev/null 2>&1
  sleep 3
  scripts/services.sh up >/dev/null 2>&1
}

TOTAL_LOST=0 TOTAL_DUP=0 FAILED=0
printf '%-18s %5s %5s %10s %8s %8s %6s\n' fault documents lost duplicated noreason crashed seconds
scenario baseline none
scenario kill-9-worker kill9_worker
scenario restart-rabbitmq restart_rabbitmq
scenario poison-message poison_message
if scripts/services.sh env 2>/dev/null | grep -q ':5433/'; then
  scenario restart-postgres restart_postgres
else
  echo "restart-postgres   skipped: Postgres is not one that scripts/services.sh started"
fi
ROBUSTNESS=${FAULT_ROBUSTNESS:-../shared/corpus/robustness}
if [ -f "$ROBUSTNESS/MANIFEST.tsv" ]; then
  # every odd PDF ends done or failed with a reason; long ones hit the token limit (a
  # permanent failure that names it) so the suite stays bounded in time
  export DOCPIPE_MAX_TOKENS=${FAULT_ROBUSTNESS_MAX_TOKENS:-16000}
  # the limit only catches a stuck run: OCR of its scans takes ~8 min on an idle 2-core machine
  # and far longer when the machine is shared, so it is generous
  scenario robustness-corpus none "$ROBUSTNESS" "${FAULT_ROBUSTNESS_TIMEOUT_S:-2400}"
  unset DOCPIPE_MAX_TOKENS
  ROBUSTNESS_RUN=$LAST_RUN
else
  echo "robustness-corpus  skipped: no $ROBUSTNESS/MANIFEST.tsv"
fi
echo "lost $TOTAL_LOST duplicated $TOTAL_DUP"
if [ -n "${ROBUSTNESS_RUN:-}" ]; then
  echo
  echo "robustness corpus, per file (why it is in the corpus → outcome):"
  sql "SELECT key, status, coalesce(left(error, 90), '') FROM documents WHERE run_id = '$ROBUSTNESS_RUN' ORDER BY key" |
    while IFS='|' read -r key status error; do
      why=$(awk -F'\t' -v f="$key" '$1 == f { print $13 }' "$ROBUSTNESS/MANIFEST.tsv" | cut -c1-45)
      printf '  %-42s %-45s %-6s %s\n' "$key" "$why" "$status" "$error"
    done
fi
if [ "$FAILED" != 0 ]; then
  echo
  echo "FAILED (logs kept in ${FAULT_LOG_DIR:-/tmp}/docpipe-fault-*.log):"
  printf '  %s\n' "${REASONS[@]}"
fi
# the summary line stays last
echo "lost $TOTAL_LOST duplicated $TOTAL_DUP"
exit $FAILED
