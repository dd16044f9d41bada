#!/usr/bin/env bash
# The end-to-end demo behind `make demo`: render the sample contracts to PDF, upload them (and
# some of ../shared/corpus/contracts when present) to the local S3 server, run ingest → worker
# → aggregator → fields worker, then show per-document status, SQL over the stored embeddings
# and the extracted contract fields.
# Expects the services' environment (scripts/services.sh env) and a built target/debug/docpipe.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${DOCPIPE_BIN:-target/debug/docpipe}
BUCKET=${DEMO_BUCKET:-docpipe-demo-$(date +%Y%m%d-%H%M%S)}  # a fresh bucket: every demo processes
CORPUS=${DEMO_CORPUS:-../shared/corpus/contracts}
CORPUS_LIMIT=${DEMO_CORPUS_LIMIT:-4}     # contracts from the shared corpus (all: 36)
MAX_PAGES=${DEMO_CORPUS_MAX_PAGES:-12}   # only the shorter ones, to keep the demo quick on a CPU
QUERY=${DEMO_QUERY:-"Is either party's liability capped, and at what amount?"}
out=demo-out
rm -rf "$out" && mkdir -p "$out"
started=$(date +%s)

echo "== rendering sample contracts"
for f in samples/*.txt; do
  "$BIN" render-pdf "$f" "$out/$(basename "${f%.txt}").pdf"
done
# one of them again as a scan fed sideways: page images, no text layer; OCR reads it
first=$(ls samples/*.txt | head -n 1)
"$BIN" render-pdf --scan --rotate 90 "$first" "$out/scanned-$(basename "${first%.txt}").pdf"
if [ -f "$CORPUS/MANIFEST.tsv" ] && [ "$CORPUS_LIMIT" -gt 0 ]; then
  echo "== adding up to $CORPUS_LIMIT contracts of at most $MAX_PAGES pages from $CORPUS"
  awk -F'\t' -v max="$MAX_PAGES" 'NR > 1 && $6 <= max && $9 == "no" && $10 == "no" { print $1 }' "$CORPUS/MANIFEST.tsv" \
    | head -n "$CORPUS_LIMIT" | while read -r f; do cp "$CORPUS/$f" "$out/"; done
fi
printf '%%PDF-1.7\nthis file was cut off in transit' > "$out/zz-truncated-upload.pdf"

echo "== uploading to s3://$BUCKET"
"$BIN" put --bucket "$BUCKET" "$out"/*.pdf | sed 's/^/   /'

echo "== running the pipeline (ingest → RabbitMQ → worker → RabbitMQ → aggregator → Postgres,"
echo "   then RabbitMQ → fields worker (the decoder) → Postgres)"
"$BIN" run --bucket "$BUCKET" --fields

if ! command -v psql >/dev/null; then
  echo "== installing the Postgres client (psql)"
  apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null
fi
psql_() { psql "$DOCPIPE_DATABASE_URL" -X -q -P pager=off "$@"; }

echo
echo "== SQL: documents of the bucket by status"
psql_ -c "SELECT status, count(*) AS documents, sum(pages) AS pages, sum(chunk_count) AS chunks
          FROM documents WHERE bucket = '$BUCKET' GROUP BY status ORDER BY status;"

echo "== SQL: pages read by OCR (scans have no text layer)"
psql_ -c "SELECT left(key, 48) AS document, status, ocr_pages, round(ocr_confidence::numeric, 1) AS ocr_confidence,
                 coalesce(warning, '') AS warning
          FROM documents WHERE bucket = '$BUCKET' AND (ocr_pages > 0 OR warning IS NOT NULL) ORDER BY key;"

echo "== SQL: for each contract, the most similar other contract (document embeddings)"
psql_ -c "WITH doc AS (
            SELECT id, left(key, 48) AS key, embedding AS e FROM documents
            WHERE bucket = '$BUCKET' AND status = 'done')
          SELECT a.key AS contract, b.key AS most_similar, round((1 - (a.e <=> b.e))::numeric, 3) AS cosine
          FROM doc a CROSS JOIN LATERAL (
            SELECT key, e FROM doc b WHERE b.id <> a.id ORDER BY a.e <=> b.e LIMIT 1) b
          ORDER BY a.key;"

echo "== SQL: contract_summary — the clause categories found in each contract"
psql_ -c "SELECT left(document, 40) AS document, category_count AS found, left(array_to_string(categories, ', '), 90) AS categories
          FROM contract_summary WHERE bucket = '$BUCKET' AND status = 'done' ORDER BY document;"

echo "== SQL: contract_clauses — the governing-law clause of each contract"
psql_ -c "SELECT left(document, 40) AS document, round(score::numeric, 3) AS score, page,
                 left(regexp_replace(text, '\s+', ' ', 'g'), 90) AS clause
          FROM contract_clauses WHERE bucket = '$BUCKET' AND category = 'Governing Law' AND present
          ORDER BY score DESC;"

echo "== SQL: contract_fields — the answers the decoder extracted, one row per contract"
psql_ -c "SELECT left(document, 32) AS document, left(title, 28) AS title, agreement_date, effective_date,
                 coalesce(expiration_date::text, expiration) AS expires, renewal_term, notice_period,
                 governing_law, left(parties, 50) AS parties
          FROM contract_fields WHERE bucket = '$BUCKET' ORDER BY document;"

echo "== SQL: contracts that renew automatically, with their notice period"
psql_ -c "SELECT left(document, 40) AS document, renewal_term, notice_period, expiration_date
          FROM contract_fields WHERE bucket = '$BUCKET' AND auto_renews ORDER BY expiration_date NULLS LAST;"

echo "== docpipe fields: one contract's answers with their evidence"
first_done=$(psql "$DOCPIPE_DATABASE_URL" -X -A -t -c "SELECT key FROM documents WHERE bucket = '$BUCKET' AND fields_status = 'done' ORDER BY key LIMIT 1")
[ -n "$first_done" ] && "$BIN" fields "$first_done"

echo "== nearest clauses to: \"$QUERY\""
echo "   (docpipe search embeds the query, then: SELECT ... FROM segments ... ORDER BY embedding <=> \$query LIMIT 5)"
"$BIN" search "$QUERY" --bucket "$BUCKET" --top 5

echo
echo "== running again: unchanged documents that are done are skipped, nothing is duplicated"
"$BIN" run --bucket "$BUCKET" 2>/dev/null | sed -n 1p

echo
echo "demo finished in $(( $(date +%s) - started )) s"
