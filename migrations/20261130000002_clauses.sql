-- Clause intelligence: segments with contextual embeddings, CUAD clause categories, the best
-- segment per document and category, and views for analysts.
-- A segment's text is substr(d.text, s.char_start + 1, s.char_end - s.char_start).

-- The document embedding: mean of its chunk embeddings weighted by owned tokens, normalised.
ALTER TABLE documents ADD COLUMN embedding vector(768);

CREATE TABLE segments (
    document_id        uuid NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    segment_index      integer NOT NULL,
    char_start         integer NOT NULL,     -- in documents.text
    char_end           integer NOT NULL,
    token_start        integer NOT NULL,     -- document tokens
    token_end          integer NOT NULL,
    page_start         integer NOT NULL,     -- 1-based, inclusive
    page_end           integer NOT NULL,
    chunk_index        integer,              -- the chunk that owns the middle token (set when embedded)
    pooled_token_start integer,              -- the part of the segment inside that chunk
    pooled_token_end   integer,
    embedding          vector(768),          -- NULL until its chunk is stored
    PRIMARY KEY (document_id, segment_index)
);
CREATE INDEX segments_embedding_hnsw ON segments USING hnsw (embedding vector_cosine_ops);

-- The clause taxonomy (CUAD's 41 categories by default), embedded as search queries.
CREATE TABLE clause_categories (
    name            text PRIMARY KEY,
    description     text NOT NULL,
    model           text NOT NULL,            -- model that made the embeddings
    query_embedding vector(768) NOT NULL,     -- the description, embedded with the query prompt
    embedding       vector(768) NOT NULL,     -- what segments are scored against: query or learned
    threshold       real NOT NULL,            -- a document has the clause when its best score >= this
    source          text NOT NULL,            -- 'query', or 'learned from N documents'
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Per document and category: the best segment, its score, and the presence flag.
CREATE TABLE document_labels (
    document_id   uuid NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    category      text NOT NULL REFERENCES clause_categories(name) ON DELETE CASCADE ON UPDATE CASCADE,
    segment_index integer NOT NULL,
    score         real NOT NULL,
    present       boolean NOT NULL,
    PRIMARY KEY (document_id, category)
);
CREATE INDEX document_labels_category ON document_labels (category) WHERE present;

-- Every segment's score for every category (computed on read).
CREATE VIEW segment_scores AS
SELECT s.document_id, s.segment_index, c.name AS category, 1 - (s.embedding <=> c.embedding) AS score
FROM segments s CROSS JOIN clause_categories c
WHERE s.embedding IS NOT NULL;

-- One row per document and category: the best clause, its score and where it is.
CREATE VIEW contract_clauses AS
SELECT d.bucket, d.key AS document, l.category, l.score, l.present, s.page_start AS page,
       substr(d.text, s.char_start + 1, s.char_end - s.char_start) AS text,
       d.id AS document_id, s.segment_index, s.char_start, s.char_end
FROM document_labels l
JOIN documents d ON d.id = l.document_id
JOIN segments s ON s.document_id = l.document_id AND s.segment_index = l.segment_index;

-- One row per document: the categories found and the best evidence for each.
CREATE VIEW contract_summary AS
SELECT d.id AS document_id, d.bucket, d.key AS document, d.status, d.pages,
       coalesce(array_agg(c.category ORDER BY c.category) FILTER (WHERE c.present), '{}') AS categories,
       count(*) FILTER (WHERE c.present) AS category_count,
       coalesce(jsonb_object_agg(c.category, jsonb_build_object(
                    'score', round(c.score::numeric, 3), 'page', c.page, 'text', left(c.text, 300)))
                FILTER (WHERE c.present), '{}') AS evidence
FROM documents d
LEFT JOIN contract_clauses c ON c.document_id = d.id
GROUP BY d.id, d.bucket, d.key, d.status, d.pages;
