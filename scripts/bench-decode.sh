#!/usr/bin/env bash
# `make bench-decode`: the decode engine against llama.cpp (llama-cpp-python) on the same GGUF
# file, the same prompt token ids and the same thread count, in one run. Prints prefill tokens/s
# on a 1,500-token contract prompt, decode tokens/s at batch 1, and generated tokens/s with 8, 32
# and 64 concurrent sequences (64 new tokens each); the last two lines are
# `decode_speedup_vs_llamacpp_batch1 X.XX` and `decode_speedup_vs_llamacpp_concurrent32 X.XX`.
# docpipe runs once per way of holding the weights: gguf (the Q4_K and Q6_K matrices in the
# file's blocks, multiplied there), q4 (the Q4_K matrices repacked for libtorch's int4 kernel,
# the others bf16), dense (every matrix dequantized at load) and auto (the default: what the
# pipeline chooses on this CPU, gguf or hybrid, printed); the last two lines are the default's,
# the others' come before them with the weights as a suffix.
#   BENCH_DECODER (the default decoder GGUF)  BENCH_THREADS (2)  BENCH_DTYPE (bf16 where the CPU
#   has AVX512-BF16 or AMX, else fp32)  BENCH_WEIGHTS ("gguf q4 dense auto")  BENCH_SEQUENCES (8,32,64)
#   BENCH_REF_SEQUENCES (8,32)  BENCH_REF_VENV (where llama-cpp-python is installed)
# llama-cpp-python has one sequence per context: it serves concurrent requests one after another.
set -euo pipefail
cd "$(dirname "$0")/.."

DOCPIPE_HOME=${DOCPIPE_HOME:-$HOME/.cache/docpipe}
GGUF=${BENCH_DECODER:-$DOCPIPE_HOME/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
THREADS=${BENCH_THREADS:-2}
if [ -z "${BENCH_DTYPE:-}" ]; then
  if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then BENCH_DTYPE=bf16; else BENCH_DTYPE=fp32; fi
fi
VENV=${BENCH_REF_VENV:-$DOCPIPE_HOME/decode-ref}
out=$DOCPIPE_HOME/bench-decode
mkdir -p "$out"
say() { printf 'bench-decode: %s\n' "$*" >&2; }
[ -f "$GGUF" ] || { say "error: no $GGUF (make decoder)"; exit 1; }

# The reference: llama.cpp through llama-cpp-python, built here for this CPU (once, ~15 min).
if ! "$VENV/bin/python" -c 'import llama_cpp, numpy' 2>/dev/null; then
  say "installing the reference (llama-cpp-python, compiled from source) into $VENV"
  python3 -m venv "$VENV"
  CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" "$VENV/bin/pip" install -q --disable-pip-version-check numpy llama-cpp-python
fi

bench=target/debug/examples/decode_bench
"$bench" prompts "$GGUF" samples "$out/prompts.json"
export OMP_NUM_THREADS=$THREADS
: > "$out/results.jsonl"
for weights in ${BENCH_WEIGHTS:-gguf q4 dense auto}; do
  say "docpipe ($BENCH_DTYPE, weights $weights, $THREADS threads)"
  DOCPIPE_LOG=warn BENCH_WEIGHTS=$weights BENCH_SEQUENCES=${BENCH_SEQUENCES:-8,32,64} \
    "$bench" run "$GGUF" "$BENCH_DTYPE" "$out/prompts.json" | tee -a "$out/results.jsonl"
done
say "llama.cpp ($THREADS threads)"
# a reference that dies (llama-cpp-python segfaulted on one AMX Xeon) leaves docpipe's figures
if ! "$VENV/bin/python" - "$GGUF" "$out/prompts.json" "$THREADS" "${BENCH_REF_SEQUENCES:-8,32}" <<'PY' | tee -a "$out/results.jsonl"
import json, sys, time
from llama_cpp import Llama
gguf, prompts, threads, seqs = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")]
doc = json.load(open(prompts))
new = doc["new_tokens"]
llm = Llama(model_path=gguf, n_ctx=2048, n_batch=2048, n_threads=threads, n_threads_batch=threads, verbose=False)
def line(**kw): print(json.dumps({"impl": "llama.cpp", "dtype": "q4_k_m", **kw}), flush=True)
def generate(ids, n):
    """prompt, then n greedy tokens; returns (prompt seconds, decode seconds)"""
    llm.reset()
    t = time.perf_counter(); llm.eval(ids); tp = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(n):
        tok = llm.sample(temp=0.0)
        llm.eval([tok])
    return tp, time.perf_counter() - t
generate(doc["questions"][0], 4)  # warm-up
tp, _ = generate(doc["prefill"], 0)
line(what="prefill", tokens=len(doc["prefill"]), seconds=tp, tokens_per_s=len(doc["prefill"]) / tp)
_, td = generate(doc["questions"][0], new)
line(what="decode", sequences=1, tokens=new, seconds=td, tokens_per_s=new / td)
for n in seqs:
    t = time.perf_counter()
    for q in doc["questions"][:n]:
        generate(q, new)
    s = time.perf_counter() - t
    line(what="concurrent", sequences=n, generated=n * new, seconds=s, tokens_per_s=n * new / s)
PY
then
  say "the reference failed: docpipe's figures only, no ratios"
fi

python3 - "$out/results.jsonl" <<'PY'
# the pipeline's default (DOCPIPE_DECODER_WEIGHTS)
DEFAULT = "auto"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
impls = []
for r in rows:
    key = r["impl"] if r["impl"] != "docpipe" else f"docpipe {r.get('weights', '').lower()}"
    r["key"] = key
    if key not in impls:
        impls.append(key)
def rate(key, what, seqs=None):
    for r in rows:
        if r["key"] == key and r["what"] == what and (seqs is None or r.get("sequences") == seqs):
            return r.get("tokens_per_s")
ours = [k for k in impls if k.startswith("docpipe")]
print()
print(f"{'tokens/s':<26}" + "".join(f"{k:>16}" for k in ours) + f"{'llama.cpp':>12}" + "".join(f"{'ratio ' + k.split()[1]:>12}" for k in ours))
for what, seqs, label in [("prefill", None, "prefill 1500 tokens"), ("decode", 1, "decode, batch 1"),
                          ("concurrent", 8, "8 concurrent"), ("concurrent", 32, "32 concurrent"),
                          ("concurrent", 64, "64 concurrent")]:
    ref = rate("llama.cpp", what, seqs)
    cells = [rate(k, what, seqs) for k in ours]
    line = f"{label:<26}" + "".join(f"{c:>16.1f}" if c else f"{'-':>16}" for c in cells)
    line += f"{ref:>12.1f}" if ref else f"{'-':>12}"
    line += "".join(f"{c / ref:>12.2f}" if c and ref else f"{'-':>12}" for c in cells)
    print(line)
for r in rows:
    if r["what"] == "load":
        chosen = f", chosen: {r['chosen']}" if r.get("chosen", r["weights"]) != r["weights"] else ""
        print(f"{r['key']}: weights in memory {r['weight_bytes'] / 2**30:.2f} GiB ({r['dtype']}{chosen}); KV cache {r['kv_bytes_per_token']} bytes/token")
if rate("llama.cpp", "decode", 1) is None or rate("llama.cpp", "concurrent", 32) is None:
    sys.exit("no llama.cpp figures: no ratios")
for k in sorted(ours, key=lambda k: k.split()[1] == DEFAULT):  # the default last
    w = k.split()[1]
    suffix = "" if w == DEFAULT else f"_{w}"
    b1 = rate(k, "decode", 1) / rate("llama.cpp", "decode", 1)
    c32 = rate(k, "concurrent", 32) / rate("llama.cpp", "concurrent", 32)
    print(f"decode_speedup_vs_llamacpp_batch1{suffix} {b1:.2f}")
    print(f"decode_speedup_vs_llamacpp_concurrent32{suffix} {c32:.2f}")
PY
