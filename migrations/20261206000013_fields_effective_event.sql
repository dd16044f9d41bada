-- An effective date that the contract defines by an event and no date ("the Closing Date as set
-- forth in the Share Purchase Agreement", "the date of the last signature"): value_type
-- 'on_event', canonical 'on <event>', value_date NULL. The wide view gains `effective`, the
-- effective date's canonical text (an ISO date, or 'on <event>'), beside `expiration`.
CREATE OR REPLACE VIEW contract_fields AS
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
                FILTER (WHERE f.field LIKE 'has:%' AND f.canonical = 'true'), '{}') AS clauses,
       max(f.canonical) FILTER (WHERE f.field = 'effective_date') AS effective
FROM documents d
JOIN document_fields f ON f.document_id = d.id
GROUP BY d.id, d.bucket, d.key, d.fields_status;
