#!/usr/bin/env bash
# `make eval LABELS=path/to/labels.tsv PDFS=path/to/pdf-dir`: run the whole pipeline on the
# labelled PDFs, then score the clause labels against the gold clauses (`docpipe eval`) with
# the shipped clause scorer (EVAL_FOLDS=N ≥ 2: scorers learned under cross-validation instead;
# DOCPIPE_CLAUSE_SCORER=file: another scorer file). EVAL_SCORE=fields scores the contract
# fields instead (`make eval-fields`: the decoder extracts those that lack them, then
# `docpipe eval-fields` scores them and the rule-based baseline).
# Expects the services' environment (scripts/services.sh env) and a built target/debug/docpipe.
# Documents already done in the eval bucket with unchanged content are not embedded again.
# The file names come from the labels file parsed as TSV with quoted fields (its clauses_json
# column holds tabs and newlines, which line-based tools split on).
set -euo pipefail
cd "$(dirname "$0")/.."

LABELS=${1:?usage: scripts/eval.sh LABELS.tsv PDF-DIR}
PDFS=${2:?usage: scripts/eval.sh LABELS.tsv PDF-DIR}
BIN=${DOCPIPE_BIN:-target/debug/docpipe}
BUCKET=${EVAL_BUCKET:-docpipe-eval}
FOLDS=${EVAL_FOLDS:-0}

[ -f "$LABELS" ] || { echo "eval: no labels file $LABELS" >&2; exit 2; }
[ -d "$PDFS" ] || { echo "eval: no PDF directory $PDFS" >&2; exit 2; }
files=()
while IFS= read -r f; do
  if [ -f "$PDFS/$f" ]; then files+=("$PDFS/$f"); else echo "eval: $f is in $LABELS but not in $PDFS; left out" >&2; fi
done < <(python3 -c '
import csv, sys
csv.field_size_limit(1 << 30)
rows = csv.reader(open(sys.argv[1], newline="", encoding="utf-8"), delimiter="\t")
next(rows, None)
print("\n".join(sorted({r[0] for r in rows if r and r[0]})))' "$LABELS")
[ ${#files[@]} -gt 0 ] || { echo "eval: none of the labelled files is in $PDFS" >&2; exit 2; }

started=$(date +%s)
echo "== uploading ${#files[@]} labelled PDFs to s3://$BUCKET"
"$BIN" put --bucket "$BUCKET" "${files[@]}" >/dev/null
echo "== running the pipeline on s3://$BUCKET"
"$BIN" run --bucket "$BUCKET"
echo "== pipeline finished in $(( $(date +%s) - started )) s; scoring"
case "${EVAL_SCORE:-clauses}" in
  clauses) "$BIN" eval --labels "$LABELS" --bucket "$BUCKET" --folds "$FOLDS" ;;
  fields) "$BIN" eval-fields --labels "$LABELS" --bucket "$BUCKET" ;;
  *) echo "eval: EVAL_SCORE is clauses or fields, not $EVAL_SCORE" >&2; exit 2 ;;
esac
