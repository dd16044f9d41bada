#!/usr/bin/env bash
# FILES.tsv for `rules_on_texts` and `parties_on_rows`: `file<TAB>cached text` for every PDF of
# DIR whose text `docpipe eval-fields --labels L --pdfs DIR` has cached (plain text layer, no
# OCR settings), named by the PDF's sha256 under $DOCPIPE_HOME/text.
#   docpipe eval-fields --labels DIR/cuad_labels.tsv --pdfs DIR   # extracts and caches once
#   scripts/experiments/text_files.sh DIR > /tmp/files.tsv
set -euo pipefail
dir=${1:?usage: text_files.sh PDF-DIR > FILES.tsv}
cache=${DOCPIPE_HOME:-$HOME/.cache/docpipe}/text
missing=0
for pdf in "$dir"/*.pdf; do
  [ -e "$pdf" ] || continue
  text="$cache/$(sha256sum "$pdf" | cut -d' ' -f1).txt"
  if [ -f "$text" ]; then
    printf '%s\t%s\n' "$(basename "$pdf")" "$text"
  else
    missing=$((missing + 1))
  fi
done
[ "$missing" -eq 0 ] || echo "text_files: $missing PDF(s) of $dir have no cached text; run docpipe eval-fields --pdfs $dir first" >&2
