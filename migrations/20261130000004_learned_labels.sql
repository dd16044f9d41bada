-- Learned clause scorers: a category scored by a linear probe on segment embeddings plus two
-- position terms (`docpipe labels --learn`), as a probability; a category scored by its query
-- alone keeps the cosine similarity. clause_score() is the one definition of a segment's score.
ALTER TABLE clause_categories
    ADD COLUMN scale real NOT NULL DEFAULT 1,                  -- |w|: embedding holds w's direction
    ADD COLUMN position_weights real[] NOT NULL DEFAULT '{0,0}', -- for exp(-i) and exp(-i/5), i = segment index
    ADD COLUMN bias real;                                      -- NULL: zero-shot (cosine)

CREATE FUNCTION clause_score(seg_embedding vector, seg_index integer, c clause_categories)
RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN c.bias IS NULL THEN 1 - (seg_embedding <=> c.embedding)
           ELSE 1 / (1 + exp(-greatest(-50, least(50,
                    c.scale * (1 - (seg_embedding <=> c.embedding))
                    + c.position_weights[1] * exp(-least(seg_index, 600))
                    + c.position_weights[2] * exp(-least(seg_index, 600) / 5.0)
                    + c.bias))))
           END
$$;

CREATE OR REPLACE VIEW segment_scores AS
SELECT s.document_id, s.segment_index, c.name AS category, clause_score(s.embedding, s.segment_index, c) AS score
FROM segments s CROSS JOIN clause_categories c
WHERE s.embedding IS NOT NULL;
