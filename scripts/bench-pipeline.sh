#!/usr/bin/env bash
# `make bench-pipeline`: the whole pipeline (`docpipe run`: ingest, worker and aggregator through
# RabbitMQ, Postgres and S3, the default settings) on real contracts, and the worker's forward
# pass (`forward_bench`) on full-length chunks of the same contracts, in the same run, with the
# same threads and dtype. Prints the per-stage breakdown of the pipeline, then
#   pipeline_vs_forward X.XX   chunk tokens/s through the pipeline ÷ forward tokens/s (the
#                              tokens the model was given, each chunk's 128-token overlap
#                              included, as forward_bench counts them: what the pipeline around
#                              the model costs); the same with document tokens (each overlap
#                              counted once), pipeline_vs_forward_document_tokens, above it
#   latency_10_pages_s X.X     one ~10-page contract alone, queued → done, model loaded
# with that contract's pure forward time (its chunk tokens at the forward rate) beside it.
# Between the run and the latency run it prints the CPU-seconds each process used over the run.
#   BENCH_CORPUS (../shared/corpus/contracts)  BENCH_DOCS first N PDFs by name (0: all)
#   BENCH_REPS timed forward passes (2)  any DOCPIPE_* setting of the pipeline applies to both.
# Expects the services' environment (scripts/services.sh env) and target/debug/docpipe and
# target/debug/examples/forward_bench built. Fresh buckets each time: nothing is skipped as
# unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${DOCPIPE_BIN:-target/debug/docpipe}
FORWARD=target/debug/examples/forward_bench
DOCPIPE_HOME=${DOCPIPE_HOME:-$HOME/.cache/docpipe}
MODEL=${DOCPIPE_MODEL:-$DOCPIPE_HOME/embeddinggemma-300m}
CORPUS=${BENCH_CORPUS:-../shared/corpus/contracts}
DOCS=${BENCH_DOCS:-0}
REPS=${BENCH_REPS:-2}
out=$DOCPIPE_HOME/bench-pipeline
mkdir -p "$out"
rm -f "$out/latency.txt"
say() { printf 'bench-pipeline: %s\n' "$*" >&2; }
[ -d "$CORPUS" ] || { say "error: no corpus at $CORPUS (BENCH_CORPUS)"; exit 2; }

mapfile -t files < <(find "$CORPUS" -maxdepth 1 -name '*.pdf' | sort)
[ "$DOCS" -gt 0 ] && files=("${files[@]:0:$DOCS}")
[ ${#files[@]} -gt 0 ] || { say "error: no PDFs in $CORPUS"; exit 2; }

# The ~10-page contract: the benchmarked file whose page count (pdfinfo) is nearest 10.
pages_of() { pdfinfo "$1" 2>/dev/null | awk '/^Pages:/ { print $2 }'; }
ten=""; best=1000
for f in "${files[@]}"; do
  p=$(pages_of "$f"); [ -n "$p" ] || continue
  d=$(( p > 10 ? p - 10 : 10 - p ))
  if [ "$d" -lt "$best" ]; then best=$d; ten=$f; fi
done

tag=$(date +%s)
say "pipeline on ${#files[@]} contracts from $CORPUS"
"$BIN" put --bucket "bench-pipeline-$tag" "${files[@]}" >/dev/null
# CPU-seconds by process over the run (scripts/experiments/cpu_by_process.py): how much of the
# two cores the model had, and who took the rest
python3 scripts/experiments/cpu_by_process.py > "$out/cpu.txt" &
poller=$!
# a failed run ends the script here (set -e): the poller must not outlive it
trap 'kill "$poller" 2>/dev/null || true' EXIT
"$BIN" run --bucket "bench-pipeline-$tag" --timings | tee "$out/run.txt"
kill "$poller"; wait "$poller" || true
trap - EXIT
say "CPU-seconds by process over the run:"
cat "$out/cpu.txt" >&2

model=$(sed -n 's/^where the time went.*, model \(.*\):$/\1/p' "$out/run.txt")
dtype=${model##*/}
[ -n "$dtype" ] || { say "error: the run did not say its model's dtype"; exit 1; }
read -r docs doc_tokens chunk_tokens doc_secs < <(sed -n 's/^pipeline: \([0-9]*\) documents done, \([0-9]*\) document tokens (\([0-9]*\) in chunks) in \([0-9.]*\) s .*/\1 \2 \3 \4/p' "$out/run.txt")
[ -n "$doc_secs" ] || { say "error: the run did not print its pipeline line"; exit 1; }

if [ -n "$ten" ]; then
  say "latency: $(basename "$ten") ($(pages_of "$ten") pages) alone"
  "$BIN" put --bucket "bench-latency-$tag" "$ten" >/dev/null
  "$BIN" run --bucket "bench-latency-$tag" --timings | tee "$out/latency.txt"
fi

# The forward pass on full-length chunks of the same contracts, as `make bench` measures it:
# the worker's CPU budget of 8192 tokens is four such chunks per pass.
say "forward pass: $dtype, 4 × 2048-token chunks, $REPS timed passes"
"$BIN" chunks "${files[@]}" 2>/dev/null \
  | python3 -c 'import sys, json
full = [l for l in sys.stdin if len(json.loads(l)["input_ids"]) == 2048]
sys.stdout.write("".join(full[:4]))' > "$out/chunks.jsonl"
[ "$(wc -l < "$out/chunks.jsonl")" -eq 4 ] || { say "error: fewer than 4 full-length chunks in these contracts"; exit 1; }
DOCPIPE_LOG=warn "$FORWARD" "$MODEL" "$dtype" 4 2048 "$REPS" "$out/chunks.jsonl" | tail -n 1 | tee "$out/forward.json"

python3 - "$out/forward.json" "$doc_tokens" "$chunk_tokens" "$doc_secs" "$out/latency.txt" <<'PY'
import json, re, sys
fwd = json.load(open(sys.argv[1]))["tokens_per_s"]
tokens, chunk_tokens, secs = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
pipe, pipe_chunks = tokens / secs, chunk_tokens / secs
print(f"\nforward pass: {fwd:.1f} tokens/s; pipeline: {pipe_chunks:.1f} chunk tokens/s ({chunk_tokens} in {secs:.1f} s), "
      f"{pipe:.1f} document tokens/s ({tokens}, each overlap counted once: {tokens / max(chunk_tokens, 1):.3f} of the chunk tokens)")
lat = None
try:
    text = open(sys.argv[5]).read()
    m = re.search(r"^pipeline: 1 documents done, (\d+) document tokens \((\d+) in chunks\) in ([0-9.]+) s", text, re.M)
    if m:
        doc, chunk, lat = int(m[1]), int(m[2]), float(m[3])
        pure = chunk / fwd
        print(f"10-page contract: {doc} document tokens, {chunk} chunk tokens; pure forward {pure:.1f} s; "
              f"queued → done {lat:.1f} s ({lat / pure:.2f}× the pure forward time)")
except FileNotFoundError:
    pass
print(f"pipeline_vs_forward_document_tokens {pipe / fwd:.2f}")
print(f"pipeline_vs_forward {pipe_chunks / fwd:.2f}")
if lat is not None:
    print(f"latency_10_pages_s {lat:.1f}")
PY
