-- Lexical clause features. Every segment keeps its hashed words and word pairs
-- (chunker::segment::terms); a learned category keeps a weight per term. A segment's lexical
-- score for a category is the sum of the weights of its terms over sqrt(number of terms), and
-- clause_score adds it to the learned probe. Zero-shot categories have no term weights.
ALTER TABLE segments ADD COLUMN terms integer[];  -- NULL for segments stored before this, until `docpipe labels` fills them

CREATE TABLE clause_term_weights (
    category text NOT NULL REFERENCES clause_categories(name) ON DELETE CASCADE ON UPDATE CASCADE,
    term     integer NOT NULL,
    weight   real NOT NULL,
    PRIMARY KEY (category, term)
);
CREATE INDEX clause_term_weights_term ON clause_term_weights (term);

-- The lexical score of a segment for each category that has a weight for one of its terms
-- (absent rows score 0).
CREATE VIEW segment_lexical AS
SELECT s.document_id, s.segment_index, w.category, sum(w.weight) / sqrt(cardinality(s.terms)) AS lexical
FROM segments s
CROSS JOIN LATERAL unnest(s.terms) AS t(term)
JOIN clause_term_weights w ON w.term = t.term
GROUP BY s.document_id, s.segment_index, w.category, cardinality(s.terms);

DROP VIEW segment_scores;
DROP FUNCTION clause_score(vector, integer, clause_categories);

CREATE FUNCTION clause_score(seg_embedding vector, seg_index integer, lexical double precision, c clause_categories)
RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN c.bias IS NULL THEN 1 - (seg_embedding <=> c.embedding)
           ELSE 1 / (1 + exp(-greatest(-50, least(50,
                    c.scale * (1 - (seg_embedding <=> c.embedding))
                    + c.position_weights[1] * exp(-least(seg_index, 600))
                    + c.position_weights[2] * exp(-least(seg_index, 600) / 5.0)
                    + coalesce(lexical, 0)
                    + c.bias))))
           END
$$;

CREATE VIEW segment_scores AS
SELECT s.document_id, s.segment_index, c.name AS category,
       clause_score(s.embedding, s.segment_index, l.lexical, c) AS score
FROM segments s
CROSS JOIN clause_categories c
LEFT JOIN segment_lexical l
       ON l.document_id = s.document_id AND l.segment_index = s.segment_index AND l.category = c.name
WHERE s.embedding IS NOT NULL;
