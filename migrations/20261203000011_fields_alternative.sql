-- The other source's answer beside the stored one: each answer field is read by the decoder and
-- by the rule-based baseline, and the field's policy picks one (docs/fields.md). Kept for audit
-- (where the two disagree, a person may want to look) and for evaluating each source alone.
-- {"source": "model"|"rules", "status": "answered"|"none"|"unknown", "raw": ..., "value": {...}}
ALTER TABLE document_fields ADD COLUMN alternative jsonb;
