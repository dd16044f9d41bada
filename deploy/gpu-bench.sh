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
# Before the budgets, a parity check on PARITY_N chunks on the same GPU: docpipe in $DTYPE with
# each form of attention (the default: packed FlashAttention; packed-gemm, the CPU's GEMM
# attention, untried on a GPU so far; banded; dense) and without the
# fused RMSNorm, and docpipe fp32, each against sentence-transformers fp32 (cosine of the
# sentence embeddings; bounds 0.999 for bf16/fp16, 0.9999 for fp32, as the CPU parity tests;
# in bf16 it also passes when no worse than sentence-transformers' own bf16), with the speed
# of each form.
#
# RANDOM_WEIGHTS=1: MODEL_DIR needs only the small files (configs, tokenizer); a checkpoint of
# the same layout with random weights is written first (scripts/random-checkpoint.py), for a
# machine the real weights cannot reach. The work per token is the same; the parity check then
# compares both implementations on those weights.
#
#   PYTHON (python3)  DEVICE (cuda)  DTYPE (bf16)  REPS (3)  SEQ (2048)
#   BUDGETS ("16384 32768 65536 131072 262144")  PEAK_TFLOPS (nominal dense bf16 peak of the
#   GPU for MFU; default: H200/H100 SXM 989)  TIME_LIMIT_S (540: stops starting new runs)
#   GEMM_N (8192: size of the square GEMM that measures the achievable rate)  PARITY_N (8)
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

if [ "${RANDOM_WEIGHTS:-0}" = 1 ]; then
  say "random weights in the layout of $MODEL"
  "$PYTHON" "$here/scripts/random-checkpoint.py" "$MODEL" "$OUT/random-model"
  MODEL=$OUT/random-model
elif [ ! -f "$MODEL/model.safetensors" ]; then
  say "error: no $MODEL/model.safetensors (set RANDOM_WEIGHTS=1 to measure speed on random weights)"
  exit 2
fi

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

# parity on the same GPU, and the attention forms against each other
pn=${PARITY_N:-8}
head -n "$pn" "$ids" > "$OUT/ids-parity.jsonl"
parity_run() { # NAME DTYPE ATTENTION (auto: the model's own choice) [VAR=VALUE ...]
  local name=$1 dtype=$2 attention=$3; shift 3
  [ "$attention" = auto ] || set -- BENCH_ATTENTION="$attention" "$@"
  if env BENCH_DEVICE="$DEVICE" BENCH_DUMP="$OUT/emb-$name.jsonl" DOCPIPE_LOG=warn "$@" \
      "$BENCH" "$MODEL" "$dtype" "$pn" "$SEQ" "$REPS" "$OUT/ids-parity.jsonl" > "$OUT/parity-$name.json" 2> "$OUT/parity-$name.err"; then
    tail -n 1 "$OUT/parity-$name.json" | sed "s/}\$/,\"parity_run\":\"$name\"}/" | tee -a "$OUT/results.jsonl"
  else
    say "docpipe $name failed: $(tail -c 300 "$OUT/parity-$name.err")"
  fi
}
parity_reference() { # DTYPE
  "$PYTHON" "$here/scripts/reference-bench.py" --model "$MODEL" --texts "$OUT/ids-parity.jsonl" --threads 1 \
      --dtype "$1" --batch-size "$pn" --reps 1 --device "$DEVICE" --dump "$OUT/emb-reference-$1.jsonl" \
      > /dev/null 2> "$OUT/parity-reference-$1.err" || say "reference $1 failed: $(tail -c 300 "$OUT/parity-reference-$1.err")"
}
say "parity: $pn chunks"
parity_run "docpipe-$DTYPE" "$DTYPE" auto
parity_run "docpipe-$DTYPE-packed-gemm" "$DTYPE" packed-gemm
parity_run "docpipe-$DTYPE-banded" "$DTYPE" banded
parity_run "docpipe-$DTYPE-dense" "$DTYPE" dense
parity_run "docpipe-$DTYPE-unfused-norm" "$DTYPE" auto DOCPIPE_FUSED_RMSNORM=0
parity_run docpipe-fp32 fp32 auto
parity_reference fp32
parity_reference "$DTYPE"
"$PYTHON" - "$OUT" "$DTYPE" <<'PY' | tee -a "$OUT/results.jsonl"
import glob, json, math, os, sys
out, dtype = sys.argv[1], sys.argv[2]
def load(name):
    p = os.path.join(out, f"emb-{name}.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else None
def worst(a, b):
    cos = lambda x, y: sum(p * q for p, q in zip(x, y)) / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y))
    return min(cos(x, y) for x, y in zip(a, b)) if a and b and len(a) == len(b) else None
ref, ref_low = load("reference-fp32"), load(f"reference-{dtype}")
# what the reduced precision costs the reference itself, on these weights
own = worst(ref_low, ref)
if own is not None:
    print(json.dumps({"impl": "parity", "run": f"reference-{dtype}", "against": "sentence-transformers fp32",
                      "min_cosine": round(own, 7)}))
for path in sorted(glob.glob(os.path.join(out, "emb-docpipe-*.jsonl"))):
    name = os.path.basename(path)[4:-6]
    got = load(name)
    fp32 = name.startswith("docpipe-fp32")
    bound = 0.9999 if fp32 else 0.999
    w = worst(got, ref)
    if w is None:
        print(json.dumps({"impl": "parity", "run": name, "failed": True}))
        continue
    row = {"impl": "parity", "run": name, "against": "sentence-transformers fp32", "min_cosine": round(w, 7), "bound": bound}
    # in reduced precision: the bound, or no worse than the reference in the same precision
    row["ok"] = w >= bound or (not fp32 and own is not None and w >= own)
    if not fp32 and ref_low:
        row[f"min_cosine_vs_reference_{dtype}"] = round(worst(got, ref_low), 7)
    print(json.dumps(row))
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
for r in rows:
    if r["impl"] == "parity":
        if r.get("failed"):
            print(f"parity {r['run']:<28} failed")
            continue
        line = f"parity {r['run']:<28} min cosine {r['min_cosine']:.7f} against {r['against']}"
        if "ok" in r:
            line += f" (bound {r['bound']}): {'ok' if r['ok'] else 'FAILS'}"
        extra = [f"{v:.7f} against the reference in {k.rsplit('_', 1)[1]}" for k, v in r.items() if k.startswith("min_cosine_vs")]
        print(line + "".join(f"; {e}" for e in extra))
for r in rows:
    if r["impl"] == "docpipe" and "parity_run" in r:
        print(f"{r['parity_run']:<28} {r['attention']:<16} {r['batch']:>3} chunks {r['tokens_per_s']:>10.0f} tokens/s")
print(f"{'impl':<22} {'budget':>7} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'% GEMM':>7} {'peak GiB':>9}")
best = {}
for r in rows:
    if r["impl"] in ("gemm", "parity") or "parity_run" in r:
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
