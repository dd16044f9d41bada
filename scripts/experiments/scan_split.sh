#!/usr/bin/env bash
# The training contracts of docs/fields.md's "Scanned contracts" table: every 5th of those with
# at most 8 pages (sorted by name, 30 at most), with their rows of cuad_labels.tsv, and a scan
# of each (`docpipe render-pdf --scan`: page images, no text layer).
#
#   scripts/experiments/scan_split.sh ../shared/corpus/cuad-train OUT_DIR [DPI]
#
# writes OUT_DIR/labels.tsv, OUT_DIR/pdfs/ (links to the born-digital PDFs) and OUT_DIR/scans/;
# then (eval-fields uploads only the labelled PDFs of PDFS):
#   EVAL_BUCKET=docpipe-dig30 make eval-fields LABELS=OUT_DIR/labels.tsv PDFS=../shared/corpus/cuad-train
#   EVAL_BUCKET=docpipe-scan30 make eval-fields LABELS=OUT_DIR/labels.tsv PDFS=OUT_DIR/scans
set -euo pipefail
root=$1 out=$2 dpi=${3:-200}
BIN=${DOCPIPE_BIN:-target/debug/docpipe}
mkdir -p "$out/pdfs" "$out/scans"
python3 - "$root" "$out" <<'PY'
import csv, os, subprocess, sys
root, out = sys.argv[1], sys.argv[2]
csv.field_size_limit(1 << 30)
with open(os.path.join(root, "cuad_labels.tsv"), encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t"))  # fields hold quoted newlines
def pages(f):
    info = subprocess.run(["pdfinfo", os.path.join(root, f)], capture_output=True, text=True).stdout
    return next((int(l.split()[1]) for l in info.splitlines() if l.startswith("Pages:")), 10**6)
files = sorted({r[0] for r in rows[1:] if r})
short = [f for f in files if pages(f) <= 8]
pick = short[::5][:30]
with open(os.path.join(out, "labels.tsv"), "w", encoding="utf-8", newline="") as o:
    w = csv.writer(o, delimiter="\t", lineterminator="\n")
    w.writerow(rows[0])
    w.writerows(r for r in rows[1:] if r and r[0] in set(pick))
with open(os.path.join(out, "list"), "w") as o:
    o.write("".join(f + "\n" for f in pick))
PY
while read -r f; do
  ln -sf "$(realpath "$root/$f")" "$out/pdfs/$f"
  [ -s "$out/scans/$f" ] || "$BIN" render-pdf --scan --dpi "$dpi" "$root/$f" "$out/scans/$f"
done < "$out/list"
echo "$(wc -l < "$out/list") contracts: $out/labels.tsv, $out/pdfs, $out/scans"
