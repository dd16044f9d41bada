#!/usr/bin/env python3
"""Does a nearest-neighbour score add to the clause scorer's ranking? (docs/clause-scorer.md,
"Ranking after the scorer"). Reads train-clauses' caches and a scorer artifact; needs numpy.

    scripts/experiments/knn_probe.py SCORER.json TRAIN_CACHE_DIR DEV_CACHE_DIR

TRAIN_CACHE_DIR: the contextual training cache the scorer learned from (its positives become
the prototypes); DEV_CACHE_DIR: documents embedded whole (`docpipe eval --pdfs ...
--embeddings contextual`), not trained on. Prints gold clauses in the top 5 of 709 (dev split)
for the probe alone, the neighbours alone and the probe's log-odds plus lambda times theirs.
"""
import json, glob, os, sys, math
import numpy as np
art = json.load(open(sys.argv[1]))
cats = [c['name'] for c in art['categories']]
W = np.array([c['weights'] for c in art['categories']], dtype=np.float32)        # K x 768
P = np.array([c['position'] for c in art['categories']], dtype=np.float32)       # K x 2
B = np.array([c['bias'] for c in art['categories']], dtype=np.float32)
T = [dict((int(t), w) for t, w in c['terms']) for c in art['categories']]

def load(dirname):
    docs = []
    for j in sorted(glob.glob(os.path.join(dirname, '*.json'))):
        d = json.load(open(j))
        e = np.fromfile(j[:-5] + '.f32', dtype=np.float32).reshape(-1, 768)
        assert e.shape[0] == len(d['chosen']), (e.shape, len(d['chosen']))
        d['E'] = e
        docs.append(d)
    return docs

def logits(d):
    idx = np.array([int(s['index']) for s in d['chosen']], dtype=np.float32)
    i = np.minimum(idx, 600)
    pos = np.stack([np.exp(-i), np.exp(-i / 5)], 1)                               # N x 2
    z = d['E'] @ W.T + pos @ P.T + B                                              # N x K
    for n, s in enumerate(d['chosen']):
        ts = s['terms']
        if ts:
            r = math.sqrt(len(ts))
            for k in range(len(cats)):
                z[n, k] += sum(T[k].get(t, 0.0) for t in ts) / r
    return z

def recall5(docs, scores):
    found = total = 0
    for d, z in zip(docs, scores):
        for k, c in enumerate(cats):
            clauses = d['gold'].get(c, [])
            if not clauses: continue
            top = set(np.argsort(-z[:, k], kind='stable')[:5].tolist())
            total += len(clauses)
            found += sum(1 for m in clauses if any(i in top for i in m))
    return found, total

tr = load(sys.argv[2])
dev = load(sys.argv[3])
print(len(dev), 'dev docs', len(tr), 'training docs', file=sys.stderr)
Z = [logits(d) for d in dev]
print('probe', recall5(dev, Z))

# prototypes: training positives per category (each weight 1), all training segments as the background
pos = {c: [] for c in cats}
allE = []
for d in tr:
    allE.append(d['E'])
    for c in cats:
        for i in d['positives'].get(c, []):
            pos[c].append(d['E'][i])
allE = np.concatenate(allE)
norm = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)
allE = norm(allE)
PE = {c: norm(np.array(v)) if v else None for c, v in pos.items()}
print({c: len(v) for c, v in pos.items()}, file=sys.stderr)

def knn(d, k=3):
    e = norm(d['E'])
    out = np.zeros((e.shape[0], len(cats)), dtype=np.float32)
    for j, c in enumerate(cats):
        if PE[c] is None: continue
        s = e @ PE[c].T
        kk = min(k, s.shape[1])
        out[:, j] = np.sort(s, 1)[:, -kk:].mean(1)
    return out

for k in (1, 3, 10):
    S = [knn(d, k) for d in dev]
    print('knn', k, recall5(dev, S))
    for lam in (2, 5, 10, 20, 40):
        print('  probe +', lam, '* knn', recall5(dev, [z + lam * s for z, s in zip(Z, S)]))
