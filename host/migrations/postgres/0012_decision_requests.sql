-- The twin of host/migrations/0012_decision_requests.sql (whose comment
-- says why): the request a schedule decision over the held inventory was
-- asked, for replaying it with another policy.
ALTER TABLE decisions ADD COLUMN request TEXT;
