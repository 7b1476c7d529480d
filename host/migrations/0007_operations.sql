-- The operations queue (issue #12, crate::operations): what Sandpiper
-- decided should happen next (a migration, a VM start) or what an engine
-- queued itself (any engine-defined kind with an opaque payload), leased
-- by an engine's worker, carried out, and reported back.
--
-- Every write is committed before the caller is answered, so an
-- acknowledged submit, lease or completion survives kill -9. Times are
-- milliseconds since the Unix epoch (wall clock), so that a lease taken
-- before a restart is honoured after it until its expiry.
CREATE TABLE operations (
    id                  TEXT    NOT NULL PRIMARY KEY,
    cluster_id          TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    -- Submit order, across the whole server: the queue's last tie-breaker.
    seq                 INTEGER NOT NULL UNIQUE CHECK (seq >= 0),
    kind                TEXT    NOT NULL,
    -- Ganeti's job priorities: -20 (most urgent) .. 19.
    priority            INTEGER NOT NULL CHECK (priority BETWEEN -20 AND 19),
    locks               TEXT    NOT NULL, -- sandpiper_queue::Locks as JSON
    payload             TEXT    NOT NULL, -- opaque JSON
    origin              TEXT    NOT NULL CHECK (origin IN ('engine', 'balance', 'pool')),
    -- The pool of an operation with origin 'pool'.
    pool_id             TEXT,
    -- The VM whose claim the operation carries (made by Sandpiper).
    vm_id               TEXT,
    state               TEXT    NOT NULL
        CHECK (state IN ('queued', 'leased', 'succeeded', 'failed', 'cancelled')),
    -- Leases taken so far (an expired lease counts).
    attempts            INTEGER NOT NULL CHECK (attempts >= 0),
    submitted_at_ms     INTEGER NOT NULL,
    lease_id            TEXT,
    lease_holder        TEXT,
    lease_expires_at_ms INTEGER,
    finished_at_ms      INTEGER,
    -- {"outcome": ..., "detail": ...} once finished.
    outcome             TEXT,
    -- A leased operation has its lease, a queued one none; a finished one
    -- keeps its last lease (who finished it, and so that a worker whose
    -- completion answer was lost learns that its own lease finished it).
    CHECK (state <> 'leased' OR lease_id IS NOT NULL),
    CHECK (state <> 'queued' OR lease_id IS NULL),
    CHECK ((origin = 'pool') = (pool_id IS NOT NULL))
) STRICT;

CREATE INDEX operations_by_state ON operations (cluster_id, state, seq);
