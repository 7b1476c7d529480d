-- The twin of host/migrations/0015_own_claims.sql (whose comment says
-- why): a decision's own claim kept in its row, not in `decision_claims`.
ALTER TABLE decisions
    ADD COLUMN own_claim BIGINT NOT NULL DEFAULT 0 CHECK (own_claim IN (0, 1));
