#!/usr/bin/env bash
# `make learning-curve`: recall@5 on labelled PDFs of clause scorers trained on nested subsets
# of the training contracts (the first N of a fixed shuffle; 0 = all). The evaluated PDFs'
# chunks are forwarded as the worker's chunk pass does and each segment is scored on its
# contextual embedding (`docpipe eval --pdfs --embeddings contextual`: what the pipeline stores
# by default), and both the training and the evaluation embeddings are cached, so once `make
# train-clauses` and one evaluation have run, each size costs only its learning. Prints one
# line per size: `curve N documents: recall@5 … recall@1 … presence P … R …`. Expects a built target/debug/docpipe.
set -euo pipefail
cd "$(dirname "$0")/.."

TRAIN_LABELS=${1:?usage: scripts/learning-curve.sh TRAIN_LABELS TRAIN_PDFS LABELS PDFS N...}
TRAIN_PDFS=${2:?}
LABELS=${3:?}
PDFS=${4:?}
shift 4
SIZES=${*:-50 100 200 0}
BIN=${DOCPIPE_BIN:-target/debug/docpipe}
OUT=${CURVE_DIR:-target/learning-curve}
mkdir -p "$OUT"

for n in $SIZES; do
  "$BIN" train-clauses --labels "$TRAIN_LABELS" --pdfs "$TRAIN_PDFS" --docs "$n" --name "curve-$n" \
    --out "$OUT/curve-$n.json" >"$OUT/train-$n.txt"
  "$BIN" eval --labels "$LABELS" --pdfs "$PDFS" --embeddings contextual --clause-scorer "$OUT/curve-$n.json" \
    >"$OUT/eval-$n.txt"
  docs=$(sed -n 's/^trained on \([0-9]*\) documents.*/\1/p' "$OUT/train-$n.txt")
  awk -v n="$docs" '/^overall \(gold clauses\)/ {r1=$(NF-4); p=$(NF-1); r=$NF} /^recall@5/ {r5=$2}
    END {printf "curve %s documents: recall@5 %s recall@1 %s presence P %s R %s\n", n, r5, r1, p, r}' "$OUT/eval-$n.txt"
done
