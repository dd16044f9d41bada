#!/usr/bin/env bash
# `make eval-fields LABELS=path/to/labels.tsv PDFS=path/to/pdf-dir`: run the pipeline on the
# labelled PDFs (documents already done in the bucket are skipped), extract the contract fields
# of those that lack them with the decoder, then score them and a rule-based baseline against
# CUAD's answers (`docpipe eval-fields`; EVAL_FIELDS_ROWS=1 also lists every miss).
# Expects the services' environment (scripts/services.sh env) and a built target/debug/docpipe.
set -euo pipefail
cd "$(dirname "$0")/.."

LABELS=${1:?usage: scripts/eval-fields.sh LABELS.tsv PDF-DIR}
PDFS=${2:?usage: scripts/eval-fields.sh LABELS.tsv PDF-DIR}
BIN=${DOCPIPE_BIN:-target/debug/docpipe}
BUCKET=${EVAL_BUCKET:-docpipe-eval}

[ -f "$LABELS" ] || { echo "eval-fields: no labels file $LABELS" >&2; exit 2; }
[ -d "$PDFS" ] || { echo "eval-fields: no PDF directory $PDFS" >&2; exit 2; }
files=()
while IFS= read -r f; do
  if [ -f "$PDFS/$f" ]; then files+=("$PDFS/$f"); else echo "eval-fields: $f is in $LABELS but not in $PDFS; left out" >&2; fi
done < <(python3 -c '
import csv, sys
csv.field_size_limit(1 << 30)
rows = csv.reader(open(sys.argv[1], newline="", encoding="utf-8"), delimiter="\t")
next(rows, None)
print("\n".join(sorted({r[0] for r in rows if r and r[0]})))' "$LABELS")
[ ${#files[@]} -gt 0 ] || { echo "eval-fields: none of the labelled files is in $PDFS" >&2; exit 2; }

started=$(date +%s)
echo "== uploading ${#files[@]} labelled PDFs to s3://$BUCKET"
"$BIN" put --bucket "$BUCKET" "${files[@]}" >/dev/null
echo "== running the pipeline on s3://$BUCKET (unchanged documents already done are skipped)"
"$BIN" run --bucket "$BUCKET"
echo "== pipeline finished in $(( $(date +%s) - started )) s; extracting fields and scoring"
"$BIN" eval-fields --labels "$LABELS" --bucket "$BUCKET"
