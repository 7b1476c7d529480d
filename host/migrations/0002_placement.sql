-- Placement state that must survive a restart: the host inventory Sandpiper
-- holds per cluster (full snapshot plus incremental updates, each host with
-- the generation of its report), the claims decisions made, and which
-- claims each logged decision made.
--
-- Records are stored as the JSON of the snapshot format (crate::snapshot),
-- the one host format. Generations are the engine's numbers (at most 2^53,
-- so that JSON clients read them exactly). Claim times are milliseconds
-- since the Unix epoch, compared as numbers for expiry.

-- A cluster's inventory generations: the highest applied, and the last
-- full snapshot's (everything at or below it is older than that snapshot).
CREATE TABLE inventory_clusters (
    cluster_id          TEXT    NOT NULL PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    generation          INTEGER NOT NULL CHECK (generation >= 0),
    snapshot_generation INTEGER NOT NULL CHECK (snapshot_generation >= 0)
) STRICT;

-- One row per host; rowid order is the snapshot order (a snapshot inserts
-- in order, an upsert of a known host updates in place, a new host comes
-- last), which is the candidate order ties are broken by.
CREATE TABLE inventory_hosts (
    cluster_id TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    host_id    TEXT    NOT NULL,
    generation INTEGER NOT NULL CHECK (generation >= 0),
    record     TEXT    NOT NULL, -- {"host": ..., "vms": [...], "generation": n}
    PRIMARY KEY (cluster_id, host_id)
) STRICT;

-- Hosts removed by an update, with the generation of the removal, so that
-- a late upsert from before it cannot bring them back. Cleared by the next
-- full snapshot.
CREATE TABLE inventory_removed (
    cluster_id TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    host_id    TEXT    NOT NULL,
    generation INTEGER NOT NULL CHECK (generation >= 0),
    PRIMARY KEY (cluster_id, host_id)
) STRICT;

-- Live claims, one per VM of a cluster.
CREATE TABLE claims (
    cluster_id    TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    vm_id         TEXT    NOT NULL,
    host_id       TEXT    NOT NULL,
    resources     TEXT    NOT NULL, -- placement::Resources as JSON
    decision_id   TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    covered_from  INTEGER,          -- set once confirmed
    PRIMARY KEY (cluster_id, vm_id)
) STRICT;

-- The claims each logged decision made (a decision about several instances
-- makes several), so that the log can be searched by any instance's VM.
CREATE TABLE decision_claims (
    decision_id TEXT NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
    vm_id       TEXT NOT NULL,
    host_id     TEXT NOT NULL,
    PRIMARY KEY (decision_id, vm_id)
) STRICT;

CREATE INDEX decision_claims_by_vm ON decision_claims (vm_id);
CREATE INDEX decisions_by_vm ON decisions (vm_id, created_at);
CREATE INDEX decisions_by_time ON decisions (created_at);
