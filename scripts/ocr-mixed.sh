#!/usr/bin/env bash
# `make bench-ocr`: the end-to-end cost of OCR on a mixed batch. The same N contracts run
# twice through `docpipe run` (model loaded each time): once born-digital, once with every
# other one replaced by a scan of itself (pages rasterised at SCAN_DPI, no text layer). Prints
# each run's wall time, the pages read by OCR and their time, and the ratio.
# Expects the services' environment (scripts/services.sh env) and a built target/debug/docpipe.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${DOCPIPE_BIN:-target/debug/docpipe}
CORPUS=${OCR_CORPUS:-../shared/corpus/contracts}
N=${OCR_MIXED_DOCS:-6}
MAX_PAGES=${OCR_MIXED_MAX_PAGES:-8}
SCAN_DPI=${SCAN_DPI:-200}
work=$(mktemp -d /tmp/docpipe-ocr-mixed.XXXXXX)
trap 'rm -rf "$work"' EXIT
sql() { psql "$DOCPIPE_DATABASE_URL" -XAtq -c "$1"; }
mkdir -p "$work/digital" "$work/mixed"
awk -F'\t' -v max="$MAX_PAGES" 'NR > 1 && $6 <= max && $9 == "no" && $10 == "no" { print $1 }' "$CORPUS/MANIFEST.tsv" \
  | head -n "$N" > "$work/list"
i=0
while read -r f; do
  cp "$CORPUS/$f" "$work/digital/"
  if [ $((i % 2)) = 1 ]; then
    "$BIN" render-pdf --scan --dpi "$SCAN_DPI" "$CORPUS/$f" "$work/mixed/scan-$f"
  else
    cp "$CORPUS/$f" "$work/mixed/"
  fi
  i=$((i + 1))
done < "$work/list"
tag=$(date +%s)
printf '%-9s %9s %6s %9s %7s %12s %8s\n' batch documents done pages ocr_pages ocr_seconds wall_s
for kind in digital mixed; do
  bucket=ocr-$kind-$tag
  "$BIN" put --bucket "$bucket" "$work/$kind"/*.pdf >/dev/null
  t0=$(date +%s.%N)
  DOCPIPE_METRICS_ADDR=off "$BIN" run --bucket "$bucket" >/dev/null 2>"$work/$kind.log"
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  row=$(sql "SELECT count(*), count(*) FILTER (WHERE status = 'done'), sum(pages), sum(ocr_pages),
                    round(coalesce(sum(ocr_seconds), 0)::numeric, 1)
             FROM documents WHERE bucket = '$bucket'")
  IFS='|' read -r docs done pages ocr secs <<<"$row"
  printf '%-9s %9s %6s %9s %7s %12s %8.1f\n' "$kind" "$docs" "$done" "$pages" "$ocr" "$secs" "$wall"
  echo "$wall" > "$work/$kind.wall"
done
awk -v m="$(cat "$work/mixed.wall")" -v d="$(cat "$work/digital.wall")" 'BEGIN { printf "mixed_vs_digital_wall %.2f\n", m / d }'
