-- Progress of every run: documents by status, chunks, throughput and ETA.
-- A document belongs to the run that last ingested it (documents.run_id); unchanged documents a
-- run skipped stay with the run that finished them and are counted in runs.skipped.
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
