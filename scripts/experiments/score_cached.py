#!/usr/bin/env python3
"""Experiment, not part of the pipeline: score the cached whole documents of a labelled set with
a scorer file, as `docpipe eval --embeddings contextual` would, and write each document's best
scores per category in the format of `docpipe train-clauses --out-of-fold` (for
`presence_doc.py`); prints recall@5 (gold clauses with a matching segment in the top five).

The documents must be in the contextual whole-document cache (`docpipe eval --labels L --pdfs
DIR --embeddings contextual`, or `docpipe train-clauses --positive-chunks all --random-chunks
all`). Needs numpy.

    scripts/experiments/score_cached.py SCORER.json LABELS.tsv PDF_DIR OUT.tsv
"""
import csv, hashlib, json, math, os, sys
import numpy as np
art = json.load(open(sys.argv[1])); labels = sys.argv[2]; pdfs = sys.argv[3]; out = sys.argv[4]
cache = os.path.expanduser('~/.cache/docpipe/clause-train/embeddinggemma-300m-contextual-whole')
csv.field_size_limit(1 << 30)
files = sorted({r['file'] for r in csv.DictReader(open(labels), delimiter='\t')})
cats = art['categories']; K = len(cats)
W = np.array([c['weights'] for c in cats], dtype=np.float64).T
P = np.array([c['position'] for c in cats]); B = np.array([c['bias'] for c in cats])
T = [dict((int(t), w) for t, w in c['terms']) for c in cats]
thr = [c['threshold'] for c in cats]
lines = ["file\tcategory\tpresent\tsegments\tembedded\tthreshold\tbest"]
found = total = 0
for f in files:
    sha = hashlib.sha256(open(os.path.join(pdfs, f), 'rb').read()).hexdigest()
    d = json.load(open(os.path.join(cache, sha + '.json')))
    E = np.fromfile(os.path.join(cache, sha + '.f32'), dtype=np.float32).reshape(-1, W.shape[0]).astype(np.float64)
    idx = np.array([s['index'] for s in d['chosen']], dtype=np.float64)
    Z = E @ W + B + np.stack([np.exp(-idx), np.exp(-idx / 5)], 1) @ P.T
    for n, s in enumerate(d['chosen']):
        ts = s['terms']
        if ts:
            r = math.sqrt(len(ts))
            for k in range(K):
                Z[n, k] += sum(T[k].get(t, 0.0) for t in ts) / r
    S = 1 / (1 + np.exp(-Z))
    for k, c in enumerate(cats):
        name = c['name']
        best = sorted(S[:, k], reverse=True)[:10]
        pres = int(name in d['present'])
        lines.append(f"{f}\t{name}\t{pres}\t{len(d['chosen'])}\t{len(d['chosen'])}\t{thr[k]:.6f}\t" + ",".join(f"{x:.6f}" for x in best))
        cl = d['gold'].get(name, [])
        if cl:
            top = set(np.argsort(-Z[:, k], kind='stable')[:5].tolist())
            total += len(cl)
            found += sum(1 for m in cl if any(i in top for i in m))
open(out, 'w').write("\n".join(lines) + "\n")
print(f"recall@5 {found}/{total} = {found/max(total,1):.3f}")
