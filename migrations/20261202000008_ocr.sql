-- OCR: which pages' text came from Tesseract rather than the PDF's text layer, how confident
-- it was, and documents flagged for a reader's attention (processed, but look).

ALTER TABLE pages
    ADD COLUMN ocr            boolean NOT NULL DEFAULT false,  -- text read by OCR
    ADD COLUMN ocr_confidence real;                            -- mean word confidence, 0-100

ALTER TABLE documents
    ADD COLUMN ocr_pages      integer NOT NULL DEFAULT 0,      -- pages whose text came from OCR
    ADD COLUMN ocr_confidence real,                            -- over those pages, by words
    ADD COLUMN ocr_seconds    real,                            -- wall time of the document's OCR
    ADD COLUMN warning        text;                            -- e.g. low OCR confidence

-- new columns go last: the view keeps its existing ones
CREATE OR REPLACE VIEW document_status AS
SELECT d.run_id, d.bucket, d.key, d.status, d.pages, d.token_count, d.chunk_count, d.chunks_done,
       d.error, d.updated_at, d.done_at, d.ocr_pages, d.ocr_confidence, d.warning
FROM documents d;

-- run_progress gains the run's OCR work (pages and seconds); dropped and made again because
-- its columns come from p.*
DROP VIEW run_progress;
CREATE VIEW run_progress AS
WITH per_run AS (
    SELECT r.id AS run_id, r.trigger, r.bucket, r.prefix, r.started_at,
           r.finished_at AS ingest_finished_at, r.objects_seen, r.skipped,
           count(d.id) AS documents,
           count(*) FILTER (WHERE d.status = 'queued') AS queued,
           count(*) FILTER (WHERE d.status = 'extracting') AS extracting,
           count(*) FILTER (WHERE d.status = 'embedding') AS embedding,
           count(*) FILTER (WHERE d.status = 'done') AS done,
           count(*) FILTER (WHERE d.status = 'failed') AS failed,
           coalesce(sum(d.chunk_count), 0)::bigint AS chunks_total,
           coalesce(sum(d.chunks_done), 0)::bigint AS chunks_done,
           coalesce(sum(d.ocr_pages), 0)::bigint AS ocr_pages,
           coalesce(sum(d.ocr_seconds), 0)::float8 AS ocr_seconds,
           count(*) FILTER (WHERE d.warning IS NOT NULL) AS flagged,
           max(d.updated_at) AS last_update
    FROM runs r LEFT JOIN documents d ON d.run_id = r.id
    GROUP BY r.id)
SELECT p.*,
       -- finished: ingest has published everything and no document is pending
       CASE WHEN p.ingest_finished_at IS NOT NULL AND p.queued + p.extracting + p.embedding = 0
            THEN greatest(p.ingest_finished_at, coalesce(p.last_update, p.ingest_finished_at)) END AS finished_at,
       (p.chunks_done / greatest(extract(epoch FROM (coalesce(
           CASE WHEN p.ingest_finished_at IS NOT NULL AND p.queued + p.extracting + p.embedding = 0
                THEN greatest(p.ingest_finished_at, coalesce(p.last_update, p.ingest_finished_at)) END,
           now()) - p.started_at)), 0.001))::float8 AS chunks_per_s,
       (CASE WHEN p.chunks_done > 0 AND p.chunks_total > p.chunks_done
            THEN (p.chunks_total - p.chunks_done)
                 * extract(epoch FROM (now() - p.started_at)) / p.chunks_done END)::float8 AS eta_s
FROM per_run p;
