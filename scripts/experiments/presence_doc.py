#!/usr/bin/env python3
"""Experiment, not part of the pipeline: ways of answering "does this contract have the clause"
(presence) from the clause scorer's segment scores, set on the out-of-fold scores of training
documents and applied to other documents (docs/clause-scorer.md, v5).

TRAIN.tsv: `docpipe train-clauses --positive-chunks all --random-chunks all --out-of-fold
TRAIN.tsv` (every segment of every training document, scored by scorers learned on the other
folds); TEST.tsv: `score_cached.py` on documents the scorer was not learned from. Prints pooled
presence precision and recall (over documents x categories) on both, for: the scorer's own
thresholds (and per category, on TRAIN); thresholds chosen together at a price lambda of a false positive (each category
maximising true positives - lambda x false positives); a document-level logistic regression per
category on the five best scores (log-odds) and the number of segments, at several cut-offs,
and with lambda-chosen cut-offs. Needs numpy and scikit-learn.

    scripts/experiments/presence_doc.py TRAIN.tsv TEST.tsv
"""
import csv, math, sys
from collections import defaultdict
import numpy as np
from sklearn.linear_model import LogisticRegression
def logit(p):
    p=min(max(p,1e-6),1-1e-6); return math.log(p/(1-p))
def load(path):
    rows=list(csv.DictReader(open(path),delimiter='\t'))
    files=sorted({r['file'] for r in rows}); cats=sorted({r['category'] for r in rows})
    fi={f:i for i,f in enumerate(files)}; ci={c:i for i,c in enumerate(cats)}
    y=np.zeros((len(files),len(cats)),int); b=np.full((len(files),len(cats),5),-14.0); thr=np.zeros(len(cats)); seg=np.zeros(len(files))
    for r in rows:
        i,k=fi[r['file']],ci[r['category']]; y[i,k]=int(r['present']); thr[k]=float(r['threshold']); seg[i]=float(r['segments'])
        s=[logit(float(x)) for x in r['best'].split(',')][:5]; b[i,k,:len(s)]=s
    return cats,y,b,thr,seg
cats,ytr,btr,thr,segtr=load(sys.argv[1]); cats2,yte,bte,thr2,segte=load(sys.argv[2])
assert cats==cats2
def pr(pred,y):
    tp=int((pred&(y==1)).sum()); fp=int((pred&(y==0)).sum()); fn=int((~pred&(y==1)).sum())
    return f"P {tp/max(tp+fp,1):.3f} R {tp/max(tp+fn,1):.3f} (tp {tp} fp {fp} fn {fn})"
lt=np.array([logit(t) for t in thr])
print("the scorer's thresholds: train", pr(btr[:,:,0]>=lt, ytr), "| test", pr(bte[:,:,0]>=lt, yte))
for k in np.argsort([-ytr[:,k].sum() for k in range(len(cats))], kind="stable"):
    print(f"  train, {cats[k]}:", pr(btr[:,k,0]>=lt[k], ytr[:,k]))
# Lagrangian thresholds on train best scores
def lag(lam, s, y):
    K=s.shape[1]; cut=np.full(K,np.inf)
    for k in range(K):
        o=np.argsort(-s[:,k]); tp=fp=0; best=0
        for j,i in enumerate(o):
            tp+=y[i,k]; fp+=1-y[i,k]
            if j+1<len(o) and s[o[j+1],k]==s[i,k]: continue
            v=tp-lam*fp
            if v>best:
                best=v; nxt=s[o[j+1],k] if j+1<len(o) else s[i,k]-1
                cut[k]=(s[i,k]+nxt)/2
    return cut
for lam in (1.0,1.25,1.5,2.0):
    c=lag(lam,btr[:,:,0],ytr)
    print(f"lagrange {lam}: train", pr(btr[:,:,0]>=c,ytr), "| test", pr(bte[:,:,0]>=c,yte))
# doc model, local features
def feats(b,seg,k): return np.hstack([b[:,k,:], np.log(seg)[:,None]])
prob_tr=np.zeros(ytr.shape); prob_te=np.zeros(yte.shape)
for k in range(len(cats)):
    X=feats(btr,segtr,k); mu,sd=X.mean(0),X.std(0)+1e-6
    if ytr[:,k].min()==ytr[:,k].max():
        prob_tr[:,k]=ytr[:,k].mean(); prob_te[:,k]=ytr[:,k].mean(); continue
    m=LogisticRegression(C=1.0,max_iter=2000).fit((X-mu)/sd,ytr[:,k])
    prob_tr[:,k]=m.predict_proba((X-mu)/sd)[:,1]; prob_te[:,k]=m.predict_proba((feats(bte,segte,k)-mu)/sd)[:,1]
for cut in (0.5,0.55,0.6,0.65,0.7):
    print(f"doc model cut {cut}: train", pr(prob_tr>=cut,ytr), "| test", pr(prob_te>=cut,yte))
for lam in (1.0,1.25,1.5):
    c=lag(lam,prob_tr,ytr)
    print(f"doc model + lagrange {lam}: train", pr(prob_tr>=c,ytr), "| test", pr(prob_te>=c,yte))
