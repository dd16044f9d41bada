-- Timings for `docpipe report` and the per-stage latencies: when a document's ingest started
-- and its text was extracted, and for every chunk the worker's forward pass that embedded it.
ALTER TABLE documents
    ADD COLUMN ingest_started_at timestamptz DEFAULT now(),  -- reset on every (re)ingest
    ADD COLUMN extracted_at      timestamptz,                -- text stored, chunks about to be published
    ADD COLUMN extract_seconds   real;                       -- PDF text extraction alone

ALTER TABLE chunks
    ADD COLUMN batch_id            uuid,     -- one forward pass
    ADD COLUMN worker              text,     -- the worker (host) that ran it
    ADD COLUMN batch_chunks        integer,
    ADD COLUMN batch_tokens        integer,  -- real tokens in the pass
    ADD COLUMN batch_padded_tokens integer,  -- chunks × longest
    ADD COLUMN prefill_ms          real,
    ADD COLUMN queue_wait_ms       real;     -- ingest published → forward pass started

CREATE INDEX chunks_created ON chunks (created_at);
