#!/usr/bin/env python3
"""Write a sentence-transformers model directory with the layout of SRC but random weights.

    python3 scripts/random-checkpoint.py SRC_DIR OUT_DIR [--seed 0]

For speed measurements on a machine that cannot hold or fetch the real weights (a GPU box
reached through a 64 MiB pipe, say): the encoder comes from SRC's config.json through
transformers' own initialisation (the same shapes and names as the real checkpoint), each
Dense layer from its config.json. SRC needs the small files only (configs, tokenizer);
OUT gets copies of them plus model.safetensors and */model.safetensors. The work per token
is the real model's; the embeddings mean nothing, but docpipe and sentence-transformers must
still agree on them, so the same directory serves a parity check.
"""
import argparse
import json
import os
import shutil
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoConfig, AutoModel  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)

    weight_files = {"model.safetensors", "pytorch_model.bin"}
    shutil.copytree(args.src, args.out, dirs_exist_ok=True,
                    ignore=lambda _d, names: [n for n in names if n in weight_files])

    config = AutoConfig.from_pretrained(args.src)
    encoder = AutoModel.from_config(config, dtype=torch.float32)
    state = {k: v.contiguous() for k, v in encoder.state_dict().items()}
    # transformers starts Gemma's RMSNorm weights at 0 (scale 1 + w = 1); trained ones are far
    # from it (EmbeddingGemma's reach 100+), and their rounding in bf16 matters: spread them.
    for k, v in state.items():
        if k.endswith("norm.weight"):
            state[k] = torch.randn_like(v) * 0.5
    save_file(state, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    params = sum(v.numel() for v in state.values())

    modules = json.load(open(os.path.join(args.src, "modules.json")))
    for m in modules:
        if not m["type"].endswith(".Dense"):
            continue
        cfg = json.load(open(os.path.join(args.src, m["path"], "config.json")))
        fan_in, fan_out = cfg["in_features"], cfg["out_features"]
        w = {"linear.weight": torch.randn(fan_out, fan_in) / fan_in ** 0.5}
        if cfg.get("bias", True):
            w["linear.bias"] = torch.zeros(fan_out)
        save_file(w, os.path.join(args.out, m["path"], "model.safetensors"), metadata={"format": "pt"})
        params += sum(v.numel() for v in w.values())

    print(f"random checkpoint: {params / 1e6:.1f} M parameters in {args.out} (layout of {args.src})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
