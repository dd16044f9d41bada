#!/usr/bin/env bash
# The decode engine on a CUDA machine that the model file cannot reach: the 1.5B's layout with
# seeded random weights (the work per token, the bytes read and the memory are those of the real
# model; the tokens are not), in one run:
#   1. a check: 8 prompts greedily, fp32, on the CPU and on the GPU (how many continuations agree);
#   2. decode_bench on the GPU, dense bf16 weights: prefill tokens/s on a 1,500-token prompt,
#      decode tokens/s at batch 1, generated tokens/s at SEQUENCES concurrent sequences;
#   3. a table with MFU for prefill (2 × parameters FLOPs per token) and the memory bandwidth
#      used by decode at batch 1 (the weights' bytes read once per token).
#
#   deploy/gpu-decode-bench.sh DECODE_BENCH SKELETON [OUT_DIR]
#
# Prepared here (the model file is 1.1 GB, the device machine takes 64 MiB):
#   cargo build -p docpipe-model --example decode_bench
#   target/debug/examples/decode_bench skeleton ~/.cache/docpipe/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
#       target/qwen2.5-1.5b-skeleton.gguf
# then on the device machine (the `device` tool's `run`, carrying both files):
#   deploy/gpu-decode-bench.sh target/debug/examples/decode_bench target/qwen2.5-1.5b-skeleton.gguf "$OUT"
# The binary uses the CUDA libtorch of $PYTHON's torch (2.11, as the build). The prompts come
# from samples/*.txt of this repository, tokenized with the skeleton's own tokenizer.
#
#   PYTHON (python3)  DEVICE (cuda)  DTYPE (bf16)  SEQUENCES ("8,32,64,256")  SEED (1)
#   MAX_RUNNING (256)  MAX_BATCH_TOKENS (16384)  KV_BLOCKS (8192 blocks of 16 tokens)
#   PEAK_TFLOPS (989: H200/H100 SXM dense bf16)  PEAK_TBPS (4.8: H200 HBM3e; H100 SXM 3.35)
set -euo pipefail
BENCH=${1:?usage: deploy/gpu-decode-bench.sh DECODE_BENCH SKELETON [OUT_DIR]}
SKELETON=${2:?usage: deploy/gpu-decode-bench.sh DECODE_BENCH SKELETON [OUT_DIR]}
OUT=${3:-gpu-decode-bench-out}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda} DTYPE=${DTYPE:-bf16} SEQUENCES=${SEQUENCES:-8,32,64,256} SEED=${SEED:-1}
# the engine's budget on the GPU: every sequence running at once, prompts in large steps
MAX_RUNNING=${MAX_RUNNING:-256} MAX_BATCH_TOKENS=${MAX_BATCH_TOKENS:-16384} KV_BLOCKS=${KV_BLOCKS:-8192}
PEAK_TFLOPS=${PEAK_TFLOPS:-989} PEAK_TBPS=${PEAK_TBPS:-4.8}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
say() { printf 'gpu-decode-bench: %s\n' "$*" >&2; }

if [ "$DEVICE" != cpu ]; then
  torch_dir=$("$PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  export LD_LIBRARY_PATH="$torch_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "torch $("$PYTHON" -c 'import torch; print(torch.__version__)') at $torch_dir; device $DEVICE, $DTYPE"
fi
gguf=$OUT/random.gguf
say "random weights in the layout of $SKELETON (seed $SEED)"
"$BENCH" random "$SKELETON" "$gguf" "$SEED"
"$BENCH" prompts "$gguf" "$here/samples" "$OUT/prompts.json"

say "check: 8 prompts, greedy, fp32, CPU against $DEVICE"
BENCH_DEVICE=$DEVICE "$BENCH" check "$gguf" "$OUT/prompts.json" | tee "$OUT/check.json"

say "decode_bench on $DEVICE, dense $DTYPE, sequences $SEQUENCES"
BENCH_DEVICE=$DEVICE BENCH_WEIGHTS=dense BENCH_SEQUENCES=$SEQUENCES BENCH_MAX_RUNNING=$MAX_RUNNING \
  BENCH_MAX_BATCH_TOKENS=$MAX_BATCH_TOKENS BENCH_KV_BLOCKS=$KV_BLOCKS DOCPIPE_LOG=warn \
  "$BENCH" run "$gguf" "$DTYPE" "$OUT/prompts.json" | tee "$OUT/results.jsonl"
rm -f "$gguf"

"$PYTHON" - "$OUT/results.jsonl" "$OUT/check.json" "$PEAK_TFLOPS" "$PEAK_TBPS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
check = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
peak_flops, peak_bw = float(sys.argv[3]) * 1e12, float(sys.argv[4]) * 1e12
load = next(r for r in rows if r["what"] == "load")
wbytes = load["weight_bytes"]
bytes_per_param = 2 if load["dtype"] in ("bf16", "fp16") else 4
params = wbytes / bytes_per_param
# the parameters as held: the embedding table counts, though a decode step reads one row of it,
# so both utilisations below overstate by its share (13 % of the 1.5B as held)
print(f"\ndevice {load['device']}, {load['dtype']}, weights {load['chosen']}: {wbytes / 2**30:.2f} GiB "
      f"({params / 1e9:.2f} B parameters as held), KV cache {load['kv_bytes_per_token']} bytes per token, load {load['seconds']:.1f} s")
print(f"check: {check['identical']}/{check['prompts']} greedy continuations identical to the CPU's, "
      f"first token the same on {check['first_token_same']}/{check['prompts']} (random weights: near-ties diverge)")
print("| | tokens/s | utilisation |\n|---|---|---|")
for r in rows:
    if r["what"] == "prefill":
        mfu = 2 * params * r["tokens_per_s"] / peak_flops
        print(f"| prefill, {r['tokens']}-token prompt | {r['tokens_per_s']:.1f} | MFU {mfu:.1%} |")
    elif r["what"] == "decode":
        bw = wbytes * r["tokens_per_s"] / peak_bw
        print(f"| decode, batch 1 | {r['tokens_per_s']:.1f} | weights read at {bw:.1%} of peak bandwidth |")
    elif r["what"] == "concurrent":
        print(f"| {r['sequences']} concurrent sequences (prefill included) | {r['tokens_per_s']:.1f} | "
              f"{r['preemptions']} preemptions |")
PY
