-- Contract fields: the answers generated from each document's evidence (title, parties, dates,
-- renewal, notice period, governing law), and the clause scorer's presence answers beside them.
-- `docpipe extract-fields` / the `fields` role write them; `contract_fields` is one row per
-- contract for analysts.

-- The extraction stage of a document: NULL until its embeddings are done and extraction is
-- asked for; 'queued' → 'running' → 'done' or 'failed' (fields_error says why).
ALTER TABLE documents
    ADD COLUMN fields_status text CHECK (fields_status IN ('queued', 'running', 'done', 'failed')),
    ADD COLUMN fields_error  text,
    ADD COLUMN fields_at     timestamptz;
CREATE INDEX documents_fields_status ON documents (fields_status);

CREATE TABLE document_fields (
    document_id    uuid NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    field          text NOT NULL,          -- 'governing_law', ...; presence answers: 'has:<CUAD category>'
    generation     integer NOT NULL,       -- the document generation it was extracted from
    status         text NOT NULL CHECK (status IN ('answered', 'none', 'unknown')),
                                           -- answered; the contract does not say; could not be read
    raw            text,                   -- the answer as generated (NULL: none)
    value          jsonb NOT NULL,         -- the normalised value, {"type": ..., ...}
    value_type     text NOT NULL,          -- none, date, partial_date, duration, perpetual,
                                           -- until_terminated, relative, jurisdiction, parties, text, boolean
    canonical      text NOT NULL DEFAULT '', -- ISO date / ISO 8601 duration / jurisdiction code / names
    value_date     date,                   -- for date fields (the expiration date once resolved)
    value_interval interval,               -- for durations
    reason         text,                   -- why it is 'unknown'
    evidence       jsonb NOT NULL DEFAULT '[]', -- [{"segment": i, "char_start": .., "char_end": .., "page": p}]
    confidence     real,                   -- exp(mean token log-probability), 0..1
    source         text NOT NULL,          -- 'model', 'rules' or 'clause_scorer'
    model          text NOT NULL,          -- model file (or scorer) that answered
    prompt_version text NOT NULL,
    run_id         uuid REFERENCES runs(id),
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, field)
);
CREATE INDEX document_fields_field ON document_fields (field, canonical);

-- One row per contract: the answers, typed, for filtering in SQL.
CREATE VIEW contract_fields AS
SELECT d.id AS document_id, d.bucket, d.key AS document, d.fields_status,
       max(f.raw) FILTER (WHERE f.field = 'document_name') AS title,
       max(f.canonical) FILTER (WHERE f.field = 'parties') AS parties,
       (array_agg(f.value -> 'parties') FILTER (WHERE f.field = 'parties'))[1] AS parties_json,
       max(f.value_date) FILTER (WHERE f.field = 'agreement_date') AS agreement_date,
       max(f.value_date) FILTER (WHERE f.field = 'effective_date') AS effective_date,
       max(f.value_date) FILTER (WHERE f.field = 'expiration_date') AS expiration_date,
       max(f.canonical) FILTER (WHERE f.field = 'expiration_date') AS expiration,
       bool_or(f.status = 'answered') FILTER (WHERE f.field = 'renewal_term') AS auto_renews,
       max(f.value_interval) FILTER (WHERE f.field = 'renewal_term') AS renewal_term,
       max(f.canonical) FILTER (WHERE f.field = 'renewal_term') AS renewal,
       max(f.value_interval) FILTER (WHERE f.field = 'notice_period_to_terminate_renewal') AS notice_period,
       max(f.value ->> 'name') FILTER (WHERE f.field = 'governing_law') AS governing_law,
       max(f.canonical) FILTER (WHERE f.field = 'governing_law') AS governing_law_code,
       coalesce(array_agg(substr(f.field, 5) ORDER BY f.field)
                FILTER (WHERE f.field LIKE 'has:%' AND f.canonical = 'true'), '{}') AS clauses
FROM documents d
JOIN document_fields f ON f.document_id = d.id
GROUP BY d.id, d.bucket, d.key, d.fields_status;
