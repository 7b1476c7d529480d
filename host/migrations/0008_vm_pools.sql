-- Prestarted VM pools (oVirt's `vm_pools` with `prestarted_vms`): a pool of
-- identical VMs in one cluster, some kept running and unassigned so that a
-- user gets one at once (host/src/pools/, docs/pools.md).
--
-- A member's running state (down, starting, up) is not stored: it is read
-- from the state of its last start operation (`start_operation_id`, an
-- operation of the queue): queued or leased is starting, succeeded is up,
-- failed or cancelled (or none) is down. Completing an operation therefore
-- needs no second write here, and no crash between two writes can leave a
-- member's state stale. Only who a member is assigned to is stored.

CREATE TABLE vm_pools (
    id             TEXT    NOT NULL PRIMARY KEY,
    name           TEXT    NOT NULL,
    description    TEXT    NOT NULL,
    cluster_id     TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    -- oVirt's MaxVmsInPool is 1000.
    size           INTEGER NOT NULL CHECK (size BETWEEN 1 AND 1000),
    prestarted_vms INTEGER NOT NULL CHECK (prestarted_vms >= 0 AND prestarted_vms <= size),
    stateful       INTEGER NOT NULL CHECK (stateful IN (0, 1)),
    vm             TEXT    NOT NULL, -- the members' shape: snapshot::VmSpec as JSON, no id
    last_run       TEXT,             -- the monitor's last run over the pool, as JSON
    created_at     TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at     TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

CREATE UNIQUE INDEX vm_pools_name_nocase ON vm_pools (name COLLATE NOCASE);
CREATE INDEX vm_pools_by_cluster ON vm_pools (cluster_id);

-- One row per member. `vm_id` is the pool's name, a dash and `idx`
-- (`desk-1`, `desk-2`, ...), fixed when the member is made; it keys the
-- member's claim and start operations.
CREATE TABLE vm_pool_members (
    pool_id            TEXT    NOT NULL REFERENCES vm_pools (id) ON DELETE CASCADE,
    idx                INTEGER NOT NULL CHECK (idx >= 1),
    vm_id              TEXT    NOT NULL UNIQUE,
    assigned_to        TEXT,             -- the user, while assigned
    start_operation_id TEXT,             -- the member's last start operation
    host_id            TEXT,             -- where that start placed it
    PRIMARY KEY (pool_id, idx)
) STRICT;
