-- What a schedule decision over the held inventory was asked (issue #18,
-- "what-if on live data"): the request body as the engine sent it, so that
-- `POST /api/v1/clusters/{id}/decisions/{decision_id}/replay` can decide it
-- again with another policy. A few hundred bytes a row. NULL for balance
-- decisions, for decisions over inline hosts (whose hosts are not kept:
-- megabytes each) and for decisions logged before this migration.
ALTER TABLE decisions ADD COLUMN request TEXT;
