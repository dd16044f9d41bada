#!/usr/bin/env python3
"""Write the EmbeddingGemma-300M golden file that docpipe's embedder is tested against.

The reference is sentence-transformers on the same model files, fp32 on CPU:

    /root/.cache/docpipe/refvenv/bin/python scripts/make-golden.py \\
        --model /root/.cache/docpipe/embeddinggemma-300m \\
        --out tests/golden/embeddinggemma-300m.json

Each case records the prompt string, the text, the exact token ids the model saw
(prompt + text, with <bos>/<eos>) and the final (already normalised) 768-d embedding.
Every case is encoded alone (batch of 1); the document cases are also encoded as one
padded batch, which must agree. `bf16_vs_fp32_cosine` is the cosine between the same
model cast to bfloat16 and the fp32 embedding. Takes a few minutes on 2 CPU cores.
"""
import argparse
import hashlib
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import sentence_transformers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.base.modules import Normalize  # noqa: E402


def long_contract() -> str:
    """A deterministic master services agreement of ~1,700 tokens, numbered sections."""
    headings = ["Definitions", "Scope of Services", "Fees and Invoicing", "Term and Renewal",
                "Confidential Information", "Data Protection", "Intellectual Property",
                "Warranties", "Limitation of Liability", "Indemnities", "Termination",
                "Assignment and Subcontracting", "Force Majeure", "Notices", "Governing Law"]
    templates = [
        "The {a} shall perform its obligations under this Section {n} with reasonable skill and care.",
        "Unless the parties agree otherwise in writing, any request under this clause must be made "
        "within {d} days of the event giving rise to it.",
        "Where the {b} disputes an amount, it shall pay the undisputed portion and notify the {a} "
        "of the reasons for the dispute.",
        "Nothing in this Section {n} limits the rights of the {b} under any other provision of this Agreement.",
        "The {a} may not rely on this clause to the extent that its own breach caused the loss in question.",
        "Each party shall keep complete and accurate records relating to {topic} for at least {y} years.",
        "A failure to exercise a right under this clause shall not operate as a waiver of that right.",
        "The {b} shall provide such information and access as the {a} reasonably requires in connection with {topic}.",
        "Any change to the arrangements described in this Section {n} shall be recorded in a written change note "
        "signed by an authorised representative of each party.",
    ]
    parts = ["MASTER SERVICES AGREEMENT\n\nThis agreement is made between Northwind Logistics Limited "
             "(the \"Customer\") and Harbourline Systems GmbH (the \"Supplier\").\n"]
    for n, heading in enumerate(headings, 1):
        a, b = ("Supplier", "Customer") if n % 2 else ("Customer", "Supplier")
        topic = heading.lower()
        lines = [f"\n{n}. {heading.upper()}"]
        for k in range(4):
            t = templates[(3 * n + 2 * k) % len(templates)]
            s = t.format(a=a, b=b, n=n, d=10 + 5 * k + n, y=2 + (n + k) % 5, topic=topic)
            lines.append(f"{n}.{k + 1} {s}")
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


CASES = [
    ("short_query", "query",
     "which contracts cap liability at twelve months of fees paid?"),
    ("clause", "document",
     "The Supplier's aggregate liability arising out of or in connection with this Agreement shall not "
     "exceed the fees paid by the Customer in the twelve months preceding the claim. This limit does not "
     "apply to liability for fraud or for death or personal injury caused by negligence."),
    ("multilingual", "document",
     "Le prestataire s'engage à livrer les éléments convenus; die Gewährleistung gilt für zwei Jahre "
     "gemäß § 438 BGB und die Straße zum Lager bleibt frei. Η σύμβαση λύεται με έγγραφη ειδοποίηση. "
     "本契約は日本法に準拠する。合同自签署之日起生效。 Signed off ✅ by both parties 🤝."),
    ("long_contract", "document", long_contract()),
    ("numbers_and_punct", "document",
     "Under Section 7.2(b)(iii), the Buyer shall pay EUR 1,250,000.00 (one million two hundred fifty "
     "thousand euros) by 31/03/2026, i.e. 2026-03-31T17:00:00Z; late amounts accrue interest at 4.5% p.a. "
     "+ 2 bps [see Schedule \"C\", ¶ 3] — capped at $75,000 or 1/8th of the price, whichever is lower."),
]


def cosine(u: torch.Tensor, v: torch.Tensor) -> float:
    u, v = u.double(), v.double()
    return float(u @ v / (u.norm() * v.norm()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    model = SentenceTransformer(args.model, device="cpu", model_kwargs={"dtype": torch.float32})
    model.eval()
    assert isinstance(model[-1], Normalize), "expected the model to end in a Normalize module"
    prompts = model.prompts
    max_len = model.max_seq_length

    seen = []  # features entering the Transformer module, one entry per forward batch
    model[0].register_forward_pre_hook(lambda _m, a: seen.append(a[0]))

    def encode(texts, prompt_name):
        seen.clear()
        with torch.inference_mode():
            e = model.encode(texts, prompt_name=prompt_name, batch_size=len(texts),
                             convert_to_tensor=True, normalize_embeddings=False)
        return e.float().cpu()

    cases, single = [], {}
    for name, prompt_name, text in CASES:
        prompt = prompts[prompt_name]
        emb = encode([text], prompt_name)[0]
        (feat,) = seen
        ids = feat["input_ids"][0].tolist()
        # sentence-transformers prepends the prompt string; tokenizing prompt+text ourselves must agree.
        own = model.preprocess([prompt + text])["input_ids"][0].tolist()
        assert ids == own, f"{name}: prompt_name ids differ from tokenizing prompt+text"
        assert ids[0] == model.tokenizer.bos_token_id and ids[-1] == model.tokenizer.eos_token_id, name
        assert len(ids) < max_len, f"{name}: {len(ids)} tokens would be truncated at {max_len}"
        assert abs(float(emb.norm()) - 1.0) < 1e-5, f"{name}: embedding not unit norm"
        if name == "long_contract":
            assert 1100 < len(ids) < 2000, f"long_contract has {len(ids)} tokens"
        print(f"{name}: {len(ids)} tokens", file=sys.stderr)
        single[name] = emb
        cases.append({"name": name, "prompt_name": prompt_name, "prompt": prompt, "text": text,
                      "n_tokens": len(ids), "input_ids": ids, "embedding": emb.tolist()})

    docs = [c for c in cases if c["prompt_name"] == "document"]
    batched = encode([c["text"] for c in docs], "document")
    assert len(seen) == 1 and seen[0]["input_ids"].shape[0] == len(docs), "documents were not one batch"
    batch_cos = {c["name"]: cosine(b, single[c["name"]]) for c, b in zip(docs, batched)}
    for n, cs in batch_cos.items():
        print(f"batched vs single {n}: cosine {cs:.9f}", file=sys.stderr)
        assert cs > 0.99999, f"{n}: batched embedding differs from single (cosine {cs})"

    model.to(torch.bfloat16)
    for c in cases:
        c["bf16_vs_fp32_cosine"] = cosine(encode([c["text"]], c["prompt_name"])[0], single[c["name"]])
        print(f"{c['name']}: bf16 vs fp32 cosine {c['bf16_vs_fp32_cosine']:.6f}", file=sys.stderr)

    h = hashlib.sha256()
    with open(os.path.join(args.model, "model.safetensors"), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    cfg = model[0].auto_model.config
    golden = {
        "model": "google/embeddinggemma-300m",
        "model_safetensors_sha256": h.hexdigest(),
        "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "device": "cpu",
        "dtype": "float32",
        "attn_implementation": cfg._attn_implementation,
        "effective_sliding_window": cfg.sliding_window,
        "max_seq_length": max_len,
        "batched_vs_single_cosine": batch_cos,
        "cases": cases,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
