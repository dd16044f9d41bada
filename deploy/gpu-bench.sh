#!/usr/bin/env bash
# The worker's forward pass on a CUDA machine, against sentence-transformers on the same GPU,
# in one run: tokens/s, MFU and peak memory for batch budgets of 16k to 256k tokens.
#
#   deploy/gpu-bench.sh FORWARD_BENCH MODEL_DIR [OUT_DIR]
#
# FORWARD_BENCH is `target/debug/examples/forward_bench` built elsewhere against torch 2.11
# (`cargo build --workspace --examples`); this machine needs torch 2.11 with CUDA (and
# sentence-transformers for the reference) in $PYTHON. The binary uses that torch's libraries.
# Inputs are full-length (2048-token) chunks: BENCH_IDS (JSONL of {"input_ids": [...]}, e.g.
# from `docpipe chunks`), else synthetic ids. Results: OUT_DIR/results.jsonl and a table; the
# last line is `speedup_vs_reference_bf16 X.XX` at the largest budget both ran.
#
#   PYTHON (python3)  DEVICE (cuda)  DTYPE (bf16)  REPS (3)  SEQ (2048)
#   BUDGETS ("16384 32768 65536 131072 262144")  PEAK_TFLOPS (nominal dense bf16 peak of the
#   GPU for MFU; default: H200/H100 SXM 989)  TIME_LIMIT_S (540: stops starting new runs)
#   GEMM_N (8192: size of the square GEMM that measures the achievable rate)
set -euo pipefail
BENCH=${1:?usage: deploy/gpu-bench.sh FORWARD_BENCH MODEL_DIR [OUT_DIR]}
MODEL=${2:?usage: deploy/gpu-bench.sh FORWARD_BENCH MODEL_DIR [OUT_DIR]}
OUT=${3:-gpu-bench-out}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda} DTYPE=${DTYPE:-bf16} REPS=${REPS:-3} SEQ=${SEQ:-2048}
BUDGETS=${BUDGETS:-16384 32768 65536 131072 262144}
PEAK_TFLOPS=${PEAK_TFLOPS:-989}
TIME_LIMIT_S=${TIME_LIMIT_S:-540}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
say() { printf 'gpu-bench: %s\n' "$*" >&2; }

torch_dir=$("$PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
torch_version=$("$PYTHON" -c 'import torch; print(torch.__version__)')
case "$torch_version" in 2.11.*) ;; *) say "warning: torch $torch_version here; the binary was built against 2.11" ;; esac
export LD_LIBRARY_PATH="$torch_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "torch $torch_version at $torch_dir; device $DEVICE, $DTYPE"

# inputs: as many full-length chunks as the largest budget holds
max_budget=$(printf '%s\n' $BUDGETS | sort -n | tail -1)
n=$((max_budget / SEQ))
ids=$OUT/ids.jsonl
"$PYTHON" - "$n" "$SEQ" "${BENCH_IDS:-}" > "$ids" <<'PY'
import json, sys
n, seq, src = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rows = []
if src:
    rows = [l for l in open(src) if len(json.loads(l)["input_ids"]) == seq]
if not rows:  # synthetic: <bos>, then ids spread over the vocabulary, <eos>
    rows = [json.dumps({"input_ids": [2] + [1000 + (t * 7919 + b * 31) % 200000 for t in range(seq - 2)] + [1]}) + "\n"
            for b in range(n)]
for i in range(n):
    sys.stdout.write(rows[i % len(rows)].rstrip("\n") + "\n")
PY

: > "$OUT/results.jsonl"
started=$SECONDS
# the GEMM rate this GPU reaches now, in the same precision: the achievable ceiling
"$PYTHON" - "$DEVICE" "$DTYPE" "${GEMM_N:-8192}" <<'PY' | tee -a "$OUT/results.jsonl"
import json, sys, time, torch
dev, dt = sys.argv[1], {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[sys.argv[2]]
N = int(sys.argv[3])
a = torch.randn(N, N, dtype=dt, device=dev); b = torch.randn(N, N, dtype=dt, device=dev)
for _ in range(3): a @ b
torch.cuda.synchronize() if dev.startswith("cuda") else None
t = time.perf_counter(); n = 20
for _ in range(n): a @ b
torch.cuda.synchronize() if dev.startswith("cuda") else None
print(json.dumps({"impl": "gemm", "dtype": sys.argv[2], "tflops": round(2 * N**3 * n / (time.perf_counter() - t) / 1e12, 3)}))
PY

over_time() { [ $((SECONDS - started)) -ge "$TIME_LIMIT_S" ]; }
for budget in $BUDGETS; do
  batch=$((budget / SEQ))
  if over_time; then say "time limit: budget $budget not run"; break; fi
  say "docpipe, $batch × $SEQ tokens"
  if ! BENCH_DEVICE=$DEVICE DOCPIPE_LOG=warn "$BENCH" "$MODEL" "$DTYPE" "$batch" "$SEQ" "$REPS" "$ids" \
      > "$OUT/docpipe-$budget.json" 2> "$OUT/docpipe-$budget.err"; then
    say "docpipe failed at $budget tokens (out of memory?): $(tail -c 300 "$OUT/docpipe-$budget.err")"
    echo "{\"impl\": \"docpipe\", \"budget\": $budget, \"failed\": true}" >> "$OUT/results.jsonl"
  else
    tail -n 1 "$OUT/docpipe-$budget.json" | sed "s/}\$/,\"budget\":$budget}/" | tee -a "$OUT/results.jsonl"
  fi
  if over_time; then say "time limit: reference at $budget not run"; break; fi
  say "sentence-transformers, $batch × $SEQ tokens"
  head -n "$batch" "$ids" > "$OUT/ids-$budget.jsonl"
  if ! "$PYTHON" "$here/scripts/reference-bench.py" --model "$MODEL" --texts "$OUT/ids-$budget.jsonl" --threads 1 \
      --dtype "$DTYPE" --batch-size "$batch" --reps "$REPS" --device "$DEVICE" \
      > "$OUT/reference-$budget.json" 2> "$OUT/reference-$budget.err"; then
    say "reference failed at $budget tokens: $(tail -c 300 "$OUT/reference-$budget.err")"
    echo "{\"impl\": \"sentence-transformers\", \"budget\": $budget, \"failed\": true}" >> "$OUT/results.jsonl"
  else
    tail -n 1 "$OUT/reference-$budget.json" | sed "s/}\$/,\"budget\":$budget}/" | tee -a "$OUT/results.jsonl"
  fi
done

"$PYTHON" - "$OUT/results.jsonl" "$MODEL/config.json" "$SEQ" "$PEAK_TFLOPS" "$DTYPE" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
c, L, peak, dtype = json.load(open(sys.argv[2])), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
h, d, q, kv, f = c["hidden_size"], c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
linear = 2 * (h * q * d + 2 * h * kv * d + q * d * h + 3 * h * f)          # per token per layer
reach = c["sliding_window"] // 2 + 1 if c.get("use_bidirectional_attention") else c["sliding_window"]
keys = [L if t == "full_attention" else min(L, 2 * reach - 1) for t in c["layer_types"]]
flops = sum(linear + 4 * q * d * k for k in keys)                         # useful work: the band only
gemm = next((r["tflops"] for r in rows if r["impl"] == "gemm"), None)
print(f"\nmodel work: {flops / 1e6:.0f} MFLOP per token at {L} tokens; GEMM now {gemm} TFLOP/s; MFU against {peak:g} TFLOP/s")
print(f"{'impl':<22} {'budget':>7} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'% GEMM':>7} {'peak GiB':>9}")
best = {}
for r in rows:
    if r["impl"] == "gemm":
        continue
    if r.get("failed"):
        print(f"{r['impl']:<22} {r['budget']:>7} {'failed':>10}")
        continue
    tf = r["tokens_per_s"] * flops / 1e12
    print(f"{r['impl']:<22} {r['budget']:>7} {r['tokens_per_s']:>10.0f} {tf:>8.1f} {100 * tf / peak:>5.1f}% "
          f"{100 * tf / gemm if gemm else 0:>6.0f}% {r.get('peak_bytes', 0) / 2**30:>9.1f}")
    best.setdefault(r["budget"], {})[r["impl"]] = r["tokens_per_s"]
both = [b for b, v in sorted(best.items()) if len(v) == 2]
if both:
    b = both[-1]
    print(f"speedup_vs_reference_{dtype} {best[b]['docpipe'] / best[b]['sentence-transformers']:.2f}")
else:
    print(f"speedup_vs_reference_{dtype} n/a (no budget where both ran)")
PY
