#!/usr/bin/env python3
"""The development split of the training contracts used to choose the clause scorer's learner
(docs/clause-scorer.md): the last 30 of the fixed shuffle that `docpipe train-clauses --docs N`
takes its first N from (sha256 of the seed's 8 little-endian bytes and the file name), so that
`--docs 400` trains on the other 400.

    scripts/experiments/dev_split.py ../shared/corpus/cuad-train OUT_DIR [SEED] [N]

writes OUT_DIR/dev.tsv (their rows of cuad_labels.tsv) and OUT_DIR/pdfs/ (links to the PDFs),
for `docpipe eval --labels OUT_DIR/dev.tsv --pdfs OUT_DIR/pdfs --clause-scorer S.json`.
"""
import csv
import hashlib
import os
import struct
import sys

root, out = sys.argv[1], sys.argv[2]
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20261202
train_n = int(sys.argv[4]) if len(sys.argv) > 4 else 400
csv.field_size_limit(1 << 30)
with open(os.path.join(root, "cuad_labels.tsv"), encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t"))  # fields hold quoted newlines
files = sorted({r[0] for r in rows[1:] if r})
files = [f for f in files if os.path.isfile(os.path.join(root, f))]
key = struct.pack("<Q", seed)
files.sort(key=lambda f: hashlib.sha256(key + f.encode()).digest())
dev = set(files[train_n:])
os.makedirs(os.path.join(out, "pdfs"), exist_ok=True)
with open(os.path.join(out, "dev.tsv"), "w", encoding="utf-8", newline="") as o:
    w = csv.writer(o, delimiter="\t", lineterminator="\n")
    w.writerow(rows[0])
    w.writerows(r for r in rows[1:] if r and r[0] in dev)
for f in sorted(dev):
    link = os.path.join(out, "pdfs", f)
    if not os.path.lexists(link):
        os.symlink(os.path.abspath(os.path.join(root, f)), link)
print(f"{len(dev)} development contracts of {len(files)} in {out}")
