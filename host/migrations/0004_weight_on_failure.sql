-- What a failing weight (score unit) does to a decision, as filters have
-- had since 0001: 'fail_open' (the only behaviour before this migration,
-- so every existing weight keeps it) leaves the unit out of the totals and
-- marks the decision degraded; 'fail_closed' fails the decision.
ALTER TABLE policy_weights
    ADD COLUMN on_failure TEXT NOT NULL DEFAULT 'fail_open'
    CHECK (on_failure IN ('fail_closed', 'fail_open'));
