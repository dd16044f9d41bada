-- docpipe schema: runs, documents, pages, chunks (with embeddings) and failures.
-- Character offsets count Unicode characters in documents.text (Postgres substr semantics,
-- 0-based, half-open): substr(d.text, c.char_start + 1, c.char_end - c.char_start).

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE runs (
    id           uuid PRIMARY KEY,
    trigger      text NOT NULL,               -- 'cli', 'run', 'cron', ...
    bucket       text NOT NULL,
    prefix       text NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,                  -- when ingest finished listing and publishing
    objects_seen integer NOT NULL DEFAULT 0,
    skipped      integer NOT NULL DEFAULT 0    -- unchanged and already done
);

CREATE TABLE documents (
    id            uuid PRIMARY KEY,
    run_id        uuid NOT NULL REFERENCES runs(id),
    bucket        text NOT NULL,
    key           text NOT NULL,
    etag          text,
    sha256        text,
    bytes         bigint,
    pages         integer,
    status        text NOT NULL CHECK (status IN ('queued', 'extracting', 'embedding', 'done', 'failed')),
    error         text,                        -- why it failed (NULL unless status = 'failed')
    generation    integer NOT NULL DEFAULT 1,  -- bumped on every (re)ingest
    token_count   integer,
    chunk_count   integer,
    chunks_done   integer NOT NULL DEFAULT 0,
    text          text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    done_at       timestamptz,
    UNIQUE (bucket, key)
);
CREATE INDEX documents_run_status ON documents (run_id, status);
CREATE INDEX documents_status ON documents (status);

CREATE TABLE pages (
    document_id uuid NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    page_no     integer NOT NULL,             -- 1-based
    char_start  integer NOT NULL,             -- in documents.text
    char_end    integer NOT NULL,
    PRIMARY KEY (document_id, page_no)
);

CREATE TABLE chunks (
    document_id       uuid NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    chunk_index       integer NOT NULL,
    generation        integer NOT NULL,
    token_start       integer NOT NULL,
    token_end         integer NOT NULL,
    owned_token_start integer NOT NULL,
    owned_token_end   integer NOT NULL,
    char_start        integer NOT NULL,
    char_end          integer NOT NULL,
    owned_char_start  integer NOT NULL,
    owned_char_end    integer NOT NULL,
    input_tokens      integer NOT NULL,
    model             text NOT NULL,
    embedding         vector(768) NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, chunk_index)
);
CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops);

CREATE TABLE failures (
    id          bigserial PRIMARY KEY,
    run_id      uuid REFERENCES runs(id),
    document_id uuid REFERENCES documents(id) ON DELETE CASCADE,
    bucket      text,
    key         text,
    stage       text NOT NULL,                -- 'fetch', 'extract', 'tokenize', 'publish', 'embed', 'store'
    class       text NOT NULL CHECK (class IN ('retryable', 'permanent')),
    attempts    integer NOT NULL DEFAULT 1,
    message     text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX failures_run ON failures (run_id);

-- One row per document with where its text came from and how far it got.
CREATE VIEW document_status AS
SELECT d.run_id, d.bucket, d.key, d.status, d.pages, d.token_count, d.chunk_count, d.chunks_done,
       d.error, d.updated_at, d.done_at
FROM documents d;
