-- A decision's own claim kept in its row. Almost every logged decision
-- makes exactly one claim, its VM on its chosen host, which the row
-- already names (`vm_id`, `host_id`); storing it again in
-- `decision_claims` cost three more b-tree inserts a decision (the table,
-- its primary key, its VM index), each deleted again when the log is
-- trimmed: a fifth of what logging a decision cost the writer
-- (`cargo bench --bench writer`, docs/performance.md). `own_claim = 1`
-- says the decision's first claim is (`vm_id`, `host_id`) and is not in
-- `decision_claims`, which holds only the others (a decision about
-- several instances). Rows logged before keep every claim there, with
-- `own_claim = 0`, and read back the same.
ALTER TABLE decisions
    ADD COLUMN own_claim INTEGER NOT NULL DEFAULT 0 CHECK (own_claim IN (0, 1));
