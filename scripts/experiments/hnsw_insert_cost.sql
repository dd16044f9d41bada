-- What the segments' HNSW index costs per stored segment, and what it finds, on the segment
-- vectors already in the database (temp tables only; nothing of docpipe's is changed):
--   psql "$DOCPIPE_DATABASE_URL" -f scripts/experiments/hnsw_insert_cost.sql
-- Every 100th vector (from the 7th) is a query and is left out of the tables. Prints the time
-- of each INSERT (row by row into an index, as the aggregator stores) and of a bulk CREATE
-- INDEX, and recall@10 of index scans against an exact scan at ef_search 40 and 100.
\timing on
SET maintenance_work_mem = '256MB';
CREATE TEMP TABLE src AS SELECT row_number() OVER () AS id, embedding
  FROM (SELECT embedding FROM segments WHERE embedding IS NOT NULL ORDER BY document_id, segment_index) x;
SELECT count(*) AS vectors FROM src;
CREATE TEMP TABLE qq AS SELECT row_number() OVER () AS qi, embedding AS e FROM src WHERE id % 100 = 7 LIMIT 200;
\echo inserts, ef_construction 64 (the default of pgvector)
CREATE TEMP TABLE ef64 (id bigint, embedding vector(768));
CREATE INDEX ON ef64 USING hnsw (embedding vector_cosine_ops);
INSERT INTO ef64 SELECT id, embedding FROM src WHERE id % 100 <> 7;
\echo inserts, ef_construction 32 (tried at stop 55, not kept)
CREATE TEMP TABLE ef32 (id bigint, embedding vector(768));
CREATE INDEX ON ef32 USING hnsw (embedding vector_cosine_ops) WITH (ef_construction = 32);
INSERT INTO ef32 SELECT id, embedding FROM src WHERE id % 100 <> 7;
\echo the rows first, then one bulk CREATE INDEX (ef_construction 64)
CREATE TEMP TABLE bulk (id bigint, embedding vector(768));
INSERT INTO bulk SELECT id, embedding FROM src WHERE id % 100 <> 7;
CREATE INDEX ON bulk USING hnsw (embedding vector_cosine_ops);
\timing off
SET enable_indexscan = off;
CREATE TEMP TABLE exact AS SELECT qi, t.id FROM qq, LATERAL (SELECT id FROM bulk ORDER BY bulk.embedding <=> qq.e LIMIT 10) t;
SET enable_indexscan = on;
CREATE TEMP TABLE hits (ef_search int, tbl text, qi bigint, id bigint);
SET hnsw.ef_search = 40;
INSERT INTO hits SELECT 40, 'ef64', qi, t.id FROM qq, LATERAL (SELECT id FROM ef64 ORDER BY ef64.embedding <=> qq.e LIMIT 10) t;
INSERT INTO hits SELECT 40, 'ef32', qi, t.id FROM qq, LATERAL (SELECT id FROM ef32 ORDER BY ef32.embedding <=> qq.e LIMIT 10) t;
INSERT INTO hits SELECT 40, 'bulk', qi, t.id FROM qq, LATERAL (SELECT id FROM bulk ORDER BY bulk.embedding <=> qq.e LIMIT 10) t;
SET hnsw.ef_search = 100;
INSERT INTO hits SELECT 100, 'ef64', qi, t.id FROM qq, LATERAL (SELECT id FROM ef64 ORDER BY ef64.embedding <=> qq.e LIMIT 10) t;
INSERT INTO hits SELECT 100, 'ef32', qi, t.id FROM qq, LATERAL (SELECT id FROM ef32 ORDER BY ef32.embedding <=> qq.e LIMIT 10) t;
INSERT INTO hits SELECT 100, 'bulk', qi, t.id FROM qq, LATERAL (SELECT id FROM bulk ORDER BY bulk.embedding <=> qq.e LIMIT 10) t;
SELECT h.tbl AS index, h.ef_search, round(count(e.id)::numeric / (SELECT count(*) FROM exact), 3) AS recall_at_10
FROM hits h LEFT JOIN exact e USING (qi, id) GROUP BY 1, 2 ORDER BY 1, 2;
