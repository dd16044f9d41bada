#!/usr/bin/env bash
# `make bench`: the worker's forward pass against sentence-transformers on the same model files,
# the same full-length contract chunks and the same thread count, in one run, fp32 and bf16.
# Prints tokens/s, ratios, GFLOP/s against the GEMM rate measured now on this machine; the last
# line is `speedup_vs_reference_bf16 X.XX`.
#   BENCH_THREADS (2)  BENCH_BATCH chunks per forward pass (4)  BENCH_REPS timed passes (2)
set -euo pipefail
cd "$(dirname "$0")/.."

DOCPIPE_HOME=${DOCPIPE_HOME:-$HOME/.cache/docpipe}
MODEL=${DOCPIPE_MODEL:-$DOCPIPE_HOME/embeddinggemma-300m}
THREADS=${BENCH_THREADS:-2}
BATCH=${BENCH_BATCH:-4}
REPS=${BENCH_REPS:-2}
CORPUS=${BENCH_CORPUS:-../shared/corpus/contracts}
VENV=$DOCPIPE_HOME/refvenv
out=$DOCPIPE_HOME/bench
mkdir -p "$out"
say() { printf 'bench: %s\n' "$*" >&2; }

# The reference: sentence-transformers with the full torch 2.11 wheel (~2.7 GB, once).
if ! "$VENV/bin/python" -c 'import sentence_transformers, torch' 2>/dev/null; then
  say "installing the reference (torch 2.11.0 + sentence-transformers) into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check torch==2.11.0 sentence-transformers
fi

# Inputs: full-length chunks (2048 tokens) of real contracts, exactly as ingest would publish them.
ids=$out/chunks.jsonl
if [ -d "$CORPUS" ]; then
  src="$CORPUS"
else
  say "no $CORPUS: using the repository's sample contracts, repeated into one long text"
  src=$out/samples; mkdir -p "$src"
  for i in 1 2 3 4 5 6; do cat samples/*.txt; done > "$src/samples.txt"
  target/debug/docpipe render-pdf "$src/samples.txt" "$src/samples.pdf"
fi
target/debug/docpipe chunks "$src"/*.pdf 2>/dev/null \
  | python3 -c 'import sys, json
full = [l for l in sys.stdin if len(json.loads(l)["input_ids"]) == 2048]
sys.stdout.write("".join(full[:int(sys.argv[1])]))' "$BATCH" > "$ids"
[ "$(wc -l < "$ids")" -eq "$BATCH" ] || { say "error: found fewer than $BATCH full-length chunks"; exit 1; }

bench_rust=target/debug/examples/forward_bench
run() { say "$*"; "$@" | tail -n 1 | tee -a "$out/results.jsonl"; }
: > "$out/results.jsonl"
export OMP_NUM_THREADS=$THREADS
"$VENV/bin/python" - "$THREADS" <<'PY' | tee -a "$out/results.jsonl"
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
    a, b = torch.randn(8192, 768, dtype=dt), torch.randn(768, 1152, dtype=dt)
    a @ b
    t = time.perf_counter(); n = 10
    for _ in range(n): a @ b
    gf = 2 * 8192 * 768 * 1152 * n / (time.perf_counter() - t) / 1e9
    print(json.dumps({"impl": "gemm", "dtype": name, "gflops": round(gf, 1)}))
PY
for dt in fp32 bf16; do
  run env DOCPIPE_LOG=warn "$bench_rust" "$MODEL" "$dt" "$BATCH" 2048 "$REPS" "$ids"
  run "$VENV/bin/python" scripts/reference-bench.py --model "$MODEL" --texts "$ids" --threads "$THREADS" \
      --dtype "$dt" --batch-size "$BATCH" --reps "$REPS"
done

python3 - "$out/results.jsonl" "$MODEL/config.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
c = json.load(open(sys.argv[2]))
h, d, q, kv, f, L = c["hidden_size"], c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"], 2048
linear = 2 * (h * q * d + 2 * h * kv * d + q * d * h + 3 * h * f)          # per token per layer
reach = c["sliding_window"] // 2 + 1 if c.get("use_bidirectional_attention") else c["sliding_window"]
keys = [L if t == "full_attention" else min(L, 2 * reach - 1) for t in c["layer_types"]]
flops_per_token = sum(linear + 4 * q * d * k for k in keys)              # useful work: the band only
gemm = {r["dtype"]: r["gflops"] for r in rows if r["impl"] == "gemm"}
tps = {(r["impl"], r["dtype"]): r["tokens_per_s"] for r in rows if "tokens_per_s" in r}
print(f"\nmodel work: {flops_per_token / 1e6:.0f} MFLOP per token at {L} tokens (sliding layers: the band only)")
print(f"{'impl':<22} {'dtype':<5} {'tokens/s':>9} {'GFLOP/s':>8} {'% of GEMM':>9}")
for (impl, dt), t in sorted(tps.items()):
    g = t * flops_per_token / 1e9
    print(f"{impl:<22} {dt:<5} {t:>9.1f} {g:>8.1f} {100 * g / gemm[dt]:>8.0f}%")
print(f"GEMM rate now: fp32 {gemm['fp32']} GFLOP/s, bf16 {gemm['bf16']} GFLOP/s")
for dt in ("fp32", "bf16"):
    print(f"speedup_vs_reference_{dt} {tps[('docpipe', dt)] / tps[('sentence-transformers', dt)]:.2f}")
PY
