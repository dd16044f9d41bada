-- The extraction stage in the per-document status view, and per run.
CREATE OR REPLACE VIEW document_status AS
SELECT d.run_id, d.bucket, d.key, d.status, d.pages, d.token_count, d.chunk_count, d.chunks_done,
       d.error, d.updated_at, d.done_at, d.ocr_pages, d.ocr_confidence, d.warning,
       d.fields_status, d.fields_error
FROM documents d;

CREATE VIEW run_fields_progress AS
SELECT d.run_id,
       count(*) FILTER (WHERE d.status = 'done') AS documents_done,
       count(*) FILTER (WHERE d.status = 'done' AND d.fields_status IS NULL) AS fields_not_queued,
       count(*) FILTER (WHERE d.fields_status = 'queued') AS fields_queued,
       count(*) FILTER (WHERE d.fields_status = 'running') AS fields_running,
       count(*) FILTER (WHERE d.fields_status = 'done') AS fields_done,
       count(*) FILTER (WHERE d.fields_status = 'failed') AS fields_failed
FROM documents d
GROUP BY d.run_id;
