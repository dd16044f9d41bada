#!/usr/bin/env python3
"""Time the sentence-transformers reference forward pass (CPU or CUDA), for comparison with docpipe.

    /root/.cache/docpipe/refvenv/bin/python scripts/reference-bench.py \\
        --model /root/.cache/docpipe/embeddinggemma-300m --texts chunks.jsonl \\
        --threads 2 --dtype bf16 --batch-size 1 [--reps 3] [--prompt-name document] [--device cuda]

Each line of FILE.jsonl is {"input_ids": [...]} (run through model(features) as is) or
{"text": "..."} (run through model.encode, with --prompt-name if given). One warm-up pass,
then --reps timed passes over all inputs; prints one line of JSON on stdout, where
tokens and seconds are totals over the timed passes, peak_bytes the peak memory (CUDA: the
largest allocated by torch; CPU: the process's peak resident memory).
"""
import argparse
import json
import os
import sys
import time

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--texts", required=True, help="JSONL, one {input_ids} or {text} per line")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt-name", default=None, help="only for {text} lines")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--dump", default=None,
                    help="write the warm-up pass's sentence embeddings here, one JSON array per line")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = SentenceTransformer(args.model, device=args.device, model_kwargs={"dtype": dtype})
    model.eval()
    rows = [json.loads(line) for line in open(args.texts, encoding="utf-8") if line.strip()]
    bs = args.batch_size

    if all("input_ids" in r for r in rows):
        batches = []
        for i in range(0, len(rows), bs):
            ids = [r["input_ids"] for r in rows[i:i + bs]]
            width = max(map(len, ids))
            pad = model.tokenizer.pad_token_id  # right padding, as the tokenizer does
            batches.append({
                "input_ids": torch.tensor([x + [pad] * (width - len(x)) for x in ids], device=args.device),
                "attention_mask": torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids],
                                               device=args.device),
            })
        tokens = sum(len(r["input_ids"]) for r in rows)

        def one_pass():
            return [model(dict(b))["sentence_embedding"].float().cpu() for b in batches]  # waits for the device
    elif all("text" in r for r in rows):
        texts = [r["text"] for r in rows]
        prompt = model.prompts[args.prompt_name] if args.prompt_name else ""
        tokens = int(model.preprocess([prompt + t for t in texts])["attention_mask"].sum())

        def one_pass():
            return [model.encode(texts, prompt_name=args.prompt_name, batch_size=bs, convert_to_tensor=True).float().cpu()]
    else:
        sys.exit("each line needs either input_ids or text (not a mix)")

    cuda = args.device.startswith("cuda")
    with torch.inference_mode():
        warm = one_pass()
        if args.dump:
            with open(args.dump, "w") as f:
                for row in torch.cat(warm).tolist():
                    f.write(json.dumps(row) + "\n")
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(args.reps):
            one_pass()
        seconds = time.perf_counter() - t0
    if cuda:
        peak = torch.cuda.max_memory_allocated()
    else:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    print(json.dumps({"impl": "sentence-transformers", "dtype": args.dtype, "device": args.device,
                      "threads": args.threads, "batch_size": bs, "reps": args.reps,
                      "tokens": tokens * args.reps, "seconds": round(seconds, 3),
                      "tokens_per_s": round(tokens * args.reps / seconds, 1), "peak_bytes": peak}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
