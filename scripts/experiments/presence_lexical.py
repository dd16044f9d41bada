#!/usr/bin/env python3
"""Experiment, not part of the pipeline: how well does a document-level *lexical* model say
whether a contract has each CUAD clause (presence), from its whole text alone?

One TF-IDF (words and word pairs) logistic regression per category, class-balanced, 5-fold
cross-validation over the labelled contracts; prints the pooled presence precision and recall
of the out-of-fold probabilities at several thresholds, to set beside the segment scorer's
(docs/clause-scorer.md). Presence as docpipe's eval counts it (`docpipe_clauses::gold`): an
answer that is `Yes` or any other non-empty answer than `No`; where both answer columns are
empty, a gold clause.

    pip install scikit-learn
    python3 scripts/experiments/presence_lexical.py ../shared/corpus/cuad-train/cuad_labels.tsv \
        ../shared/corpus/cuad-train /tmp/presence-txt [C]

Text comes from `pdftotext` (poppler), cached in the third argument: close to, not the same as,
what ingest extracts (no OCR, so scanned contracts have little text).
"""
import csv, json, os, subprocess, sys

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold

labels, pdfs, cache = sys.argv[1], sys.argv[2], sys.argv[3]
C = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
csv.field_size_limit(1 << 30)
present, answered, clauses = set(), set(), set()
for r in csv.DictReader(open(labels), delimiter="\t"):
    f, c = r["file"], (r["category"] or "").strip()
    if not f or not c:
        continue
    c = c.replace("- Answer", "").strip()
    a = (r["answer"] or "").strip()
    if a:
        answered.add((f, c))
        if a.lower() != "no":
            present.add((f, c))
    j = (r["clauses_json"] or "").strip()
    if j and any(x.strip() for x in json.loads(j)):
        clauses.add((f, c))
present |= clauses - answered
keys = present | answered | clauses
files = sorted({f for f, _ in keys})
cats = sorted({c for _, c in keys})

os.makedirs(cache, exist_ok=True)
texts = []
for f in files:
    txt = os.path.join(cache, f[:-4] + ".txt")
    if not os.path.exists(txt):
        subprocess.run(["pdftotext", "-q", os.path.join(pdfs, f), txt], check=False)
    texts.append(open(txt, errors="replace").read() if os.path.exists(txt) else "")

Y = np.array([[(f, c) in present for c in cats] for f in files])
oof = np.zeros(Y.shape)
for tr, te in KFold(5, shuffle=True, random_state=0).split(files):
    v = TfidfVectorizer(ngram_range=(1, 2), min_df=3, max_features=50000, sublinear_tf=True)
    Xtr, Xte = v.fit_transform([texts[i] for i in tr]), v.transform([texts[i] for i in te])
    for j in range(len(cats)):
        y = Y[tr, j]
        if y.all() or not y.any():
            oof[te, j] = y.mean()
            continue
        m = LogisticRegression(C=C, class_weight="balanced", max_iter=2000).fit(Xtr, y)
        oof[te, j] = m.predict_proba(Xte)[:, 1]
print(f"{len(files)} contracts, {len(cats)} categories, {Y.sum()} present pairs ({Y.mean():.1%})")
for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
    p = oof >= t
    tp = (p & Y).sum()
    print(f"threshold {t:.1f}: presence precision {tp / max(p.sum(), 1):.3f} recall {tp / Y.sum():.3f}")
