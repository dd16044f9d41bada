#!/usr/bin/env python3
"""Does a hidden layer lift the clause scorer? (docs/clause-scorer.md, "Ranking after the
scorer"). Learns, on a contextual training cache, the probe's embedding weights again (linear,
H 0) or with a hidden layer of H ReLU units beside them, with the probe's loss (class-balanced
per segment, plus the listwise loss at 16) and its lexical and position weights held fixed;
prints gold clauses in the top 5 of the development split. Needs numpy.

    scripts/experiments/mlp_probe.py SCORER.json TRAIN_CACHE_DIR DEV_CACHE_DIR
"""
import json, glob, os, sys, math, time
import numpy as np
rng = np.random.default_rng(0)
art = json.load(open(sys.argv[1]))
cats = [c['name'] for c in art['categories']]; K = len(cats)
Wp = np.array([c['weights'] for c in art['categories']], dtype=np.float32).T   # 768 x K
P = np.array([c['position'] for c in art['categories']], dtype=np.float32)
B = np.array([c['bias'] for c in art['categories']], dtype=np.float32)
T = [dict((int(t), w) for t, w in c['terms']) for c in art['categories']]

def load(d):
    out = []
    for j in sorted(glob.glob(os.path.join(d, '*.json'))):
        x = json.load(open(j)); x['E'] = np.fromfile(j[:-5] + '.f32', dtype=np.float32).reshape(-1, 768); out.append(x)
    return out

def fixed(d):   # the probe's lexical and position parts
    idx = np.minimum(np.array([int(s['index']) for s in d['chosen']], dtype=np.float32), 600)
    z = np.stack([np.exp(-idx), np.exp(-idx / 5)], 1) @ P.T
    for n, s in enumerate(d['chosen']):
        ts = s['terms']
        if ts:
            r = math.sqrt(len(ts))
            for k in range(K): z[n, k] += sum(T[k].get(t, 0.0) for t in ts) / r
    return z.astype(np.float32)

tr = load(sys.argv[2]); dev = load(sys.argv[3])
X = np.concatenate([d['E'] for d in tr]); F = np.concatenate([fixed(d) for d in tr])
SW = np.concatenate([np.array([float(s.get('weight', 1.0)) for s in d['chosen']], dtype=np.float32) for d in tr])
Y = np.zeros((len(X), K), dtype=np.float32); docs = []; o = 0
for d in tr:
    n = len(d['chosen'])
    for k, c in enumerate(cats):
        for i in d['positives'].get(c, []): Y[o + i, k] = 1
    docs.append((o, o + n)); o += n
pairs = [(a, b, k) for (a, b) in docs for k in range(K) if Y[a:b, k].max() > 0]
nf = SW.sum(); pf = (SW[:, None] * Y).sum(0)
wpos = np.where(pf > 0, (nf - pf) / np.maximum(pf, 1e-9), 0); mean = (pf * wpos + (nf - pf)) / nf
CW = np.where(Y > 0.5, wpos / mean, 1 / mean).astype(np.float32)
DX = [d['E'] for d in dev]; DF = [fixed(d) for d in dev]
print(len(X), 'training rows', len(pairs), 'pairs', file=sys.stderr)

def recall5(Z):
    found = total = 0
    for d, z in zip(dev, Z):
        for k, c in enumerate(cats):
            cl = d['gold'].get(c, [])
            if not cl: continue
            top = set(np.argsort(-z[:, k], kind='stable')[:5].tolist()); total += len(cl)
            found += sum(1 for m in cl if any(i in top for i in m))
    return found

def grad_z(Z, LW):
    G = (1 / (1 + np.exp(-Z)) - Y) * SW[:, None] * CW / nf
    scale = LW / len(pairs)
    for a, b, k in pairs:
        z = Z[a:b, k]; e = SW[a:b] * np.exp(z - z.max()); y = Y[a:b, k] > 0.5
        G[a:b, k] += scale * (e / e.sum() - np.where(y, e / e[y].sum(), 0))
    return G

def train(H, steps=300, lr=1e-2, l2=1e-4, LW=16.0, drop=0.0):
    W = Wp.copy(); b = B.copy()
    U = (rng.standard_normal((768, H)) * 0.05).astype(np.float32) if H else None
    a = np.zeros(H, np.float32); V = np.zeros((H, K), np.float32)
    params = [W, b] + ([U, a, V] if H else [])
    m = [np.zeros_like(p) for p in params]; v = [np.zeros_like(p) for p in params]
    for t in range(1, steps + 1):
        Z = X @ W + b + F
        if H:
            pre = X @ U + a; h = np.maximum(pre, 0); Z = Z + h @ V
        G = grad_z(Z, LW)
        gs = [X.T @ G + l2 * (W - Wp), G.sum(0)]
        if H:
            dh = (G @ V.T) * (pre > 0)
            gs += [X.T @ dh + l2 * U, dh.sum(0), h.T @ G + l2 * V]
        for p, g, mi, vi in zip(params, gs, m, v):
            mi *= 0.9; mi += 0.1 * g; vi *= 0.999; vi += 0.001 * g * g
            p -= lr * (mi / (1 - 0.9 ** t)) / (np.sqrt(vi / (1 - 0.999 ** t)) + 1e-8)
    def score(E, Fd):
        Z = E @ W + b + Fd
        if H: Z = Z + np.maximum(E @ U + a, 0) @ V
        return Z
    return score

print('probe as shipped', recall5([x @ Wp + B + f for x, f in zip(DX, DF)]), flush=True)
for H, steps, lr, l2 in [(0, 300, 1e-3, 1e-3), (64, 300, 1e-3, 1e-3), (256, 300, 1e-3, 1e-3), (256, 300, 1e-3, 1e-2)]:
    t0 = time.time(); s = train(H, steps, lr, l2)
    print('H', H, 'steps', steps, 'lr', lr, 'l2', l2, '->', recall5([s(x, f) for x, f in zip(DX, DF)]), f'{time.time()-t0:.0f}s', flush=True)
