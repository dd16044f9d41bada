#!/usr/bin/env python3
"""Write the decoder golden files that docpipe's GGUF reader and Qwen2 decoder are tested
against. The references are llama.cpp's own code on the same GGUF file:

    python3 -m venv ~/.cache/docpipe/decode-ref
    CMAKE_ARGS="-DLLAMA_CURL=OFF" ~/.cache/docpipe/decode-ref/bin/pip install gguf numpy jinja2 llama-cpp-python
    ~/.cache/docpipe/decode-ref/bin/python scripts/make-decode-golden.py \\
        --model ~/.cache/docpipe/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \\
        --out tests/golden/qwen2.5-coder-0.5b-q4_k_m.json

- `dequant`: per ggml block type present, the first tensor of that type dequantized by
  gguf-py (`gguf.quants.dequantize`, a port of ggml-quants.c): its first and last values,
  sum and sum of absolute values.
- `cases`: ten contract prompts (three sample contracts × questions) rendered with the
  GGUF's chat template (jinja2, add_generation_prompt), tokenized by llama.cpp, the top 20
  logits of the first step, and the 64-token greedy continuation (llama.cpp, fp32 compute,
  one sequence at a time, argmax on the full logits).
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

import gguf
import jinja2
import numpy as np
from gguf.quants import dequantize
from llama_cpp import Llama

QUESTIONS = [
    "Who are the parties to this agreement? Answer with their names only.",
    "Which law governs this agreement?",
    "When does this agreement take effect, and how long does it last?",
    "How much notice is needed to terminate this agreement?",
]
# (sample, question) pairs: ten cases over the three sample contracts
CASES = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 3), (2, 0), (2, 1), (2, 2)]
NEW_TOKENS = 64
TOP = 20


def dequant_checks(reader):
    seen = {}
    for t in reader.tensors:
        kind = t.tensor_type.name
        if kind in seen:
            continue
        v = dequantize(t.data, t.tensor_type).astype(np.float64).ravel()
        seen[kind] = {
            "tensor": t.name,
            "type": kind,
            "n": int(v.size),
            "first": [float(x) for x in v[:8]],
            "last": [float(x) for x in v[-4:]],
            "sum": float(v.sum()),
            "abs_sum": float(np.abs(v).sum()),
        }
    return list(seen.values())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--samples", default=str(Path(__file__).resolve().parent.parent / "samples"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    h = hashlib.sha256()
    with open(a.model, "rb") as f:
        for buf in iter(lambda: f.read(1 << 20), b""):
            h.update(buf)
    reader = gguf.GGUFReader(a.model)
    template = reader.fields["tokenizer.chat_template"].contents()
    env = jinja2.Environment()
    tmpl = env.from_string(template)
    samples = sorted(Path(a.samples).glob("*.txt"))
    texts = [p.read_text() for p in samples]

    llm = Llama(model_path=a.model, n_ctx=1536, n_batch=512, n_threads=a.threads, logits_all=True, verbose=False)
    cases = []
    for si, qi in CASES:
        user = f"{texts[si]}\n\n{QUESTIONS[qi]}"
        prompt = tmpl.render(messages=[{"role": "user", "content": user}], add_generation_prompt=True)
        ids = llm.tokenize(prompt.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        first = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        order = np.argsort(-first, kind="stable")[:TOP]
        out = []
        logits = first
        for _ in range(NEW_TOKENS):
            t = int(np.argmax(logits))
            out.append(t)
            if t in (151643, 151645):
                break
            llm.eval([t])
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        cases.append({
            "sample": samples[si].name,
            "question": QUESTIONS[qi],
            "prompt": prompt,
            "prompt_ids": ids,
            "top_ids": [int(i) for i in order],
            "top_logits": [float(first[i]) for i in order],
            "greedy": out,
            "greedy_text": llm.detokenize(out).decode("utf-8", "replace"),
        })
        print(f"{samples[si].name} q{qi}: {len(ids)} prompt tokens → {cases[-1]['greedy_text'][:60]!r}", file=sys.stderr)
    golden = {
        "model": Path(a.model).name,
        "sha256": h.hexdigest(),
        "reference": "llama-cpp-python (llama.cpp), fp32 compute, greedy one sequence at a time; gguf-py dequantize",
        "new_tokens": NEW_TOKENS,
        "dequant": dequant_checks(reader),
        "cases": cases,
    }
    Path(a.out).write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
