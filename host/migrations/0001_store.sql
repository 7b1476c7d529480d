-- Sandpiper's store: oVirt's scheduling scheme (policy units, cluster
-- policies, their links and parameters, clusters) grown up with module
-- blobs, bearer tokens and a decisions log.
--
-- Ids are UUIDs in their hyphenated text form and times are RFC 3339 UTC
-- text, so a dump of the database reads without tools. Tables are STRICT so
-- a wrong type is refused instead of stored.

-- Uploaded `.wasm` bytes, content-addressed: the same bytes are one row
-- however often they are uploaded. The source of truth for a unit.
CREATE TABLE modules (
    sha256      TEXT    NOT NULL PRIMARY KEY CHECK (length(sha256) = 64),
    size_bytes  INTEGER NOT NULL CHECK (size_bytes >= 0),
    wasm        BLOB    NOT NULL,
    created_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

-- Machine code compiled from a module by our own compile step. Keyed by the
-- engine's compatibility hash too, so a wasmtime upgrade (or a changed engine
-- configuration) recompiles from the `.wasm` instead of loading a stale blob.
CREATE TABLE artifacts (
    module_sha256 TEXT NOT NULL REFERENCES modules (sha256) ON DELETE CASCADE,
    engine_hash   TEXT NOT NULL,
    artifact      BLOB NOT NULL,
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (module_sha256, engine_hash)
) STRICT;

-- Bearer tokens. Only a hash of each token is stored; a revoked token keeps
-- its row (revoked_at set) so the audit trail (`uploaded_by`) still resolves.
CREATE TABLE tokens (
    id           TEXT NOT NULL PRIMARY KEY,
    name         TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('admin', 'engine', 'reader')),
    token_sha256 TEXT NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    revoked_at   TEXT
) STRICT;

-- Policy units (oVirt's policy_unit). Which roles a unit implements is read
-- from its module's exports, never declared by hand.
CREATE TABLE policy_units (
    id            TEXT    NOT NULL PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    description   TEXT    NOT NULL,
    internal      INTEGER NOT NULL CHECK (internal IN (0, 1)),
    enabled       INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    has_filter    INTEGER NOT NULL CHECK (has_filter IN (0, 1)),
    has_score     INTEGER NOT NULL CHECK (has_score IN (0, 1)),
    has_balance   INTEGER NOT NULL CHECK (has_balance IN (0, 1)),
    score_order   TEXT    NOT NULL CHECK (score_order IN ('lower-is-better', 'higher-is-better')),
    module_sha256 TEXT    NOT NULL REFERENCES modules (sha256),
    uploaded_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    uploaded_by   TEXT    NOT NULL
) STRICT;

-- The parameters a unit declares (oVirt's parameterRegExMap), in the order
-- the unit declares them.
CREATE TABLE unit_params (
    unit_id       TEXT    NOT NULL REFERENCES policy_units (id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    name          TEXT    NOT NULL,
    description   TEXT    NOT NULL,
    default_value TEXT    NOT NULL,
    pattern       TEXT    NOT NULL,
    PRIMARY KEY (unit_id, name),
    UNIQUE (unit_id, position)
) STRICT;

-- Scheduling policies (oVirt's cluster policies).
CREATE TABLE scheduling_policies (
    id          TEXT    NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    description TEXT    NOT NULL,
    locked      INTEGER NOT NULL DEFAULT 0 CHECK (locked IN (0, 1)),
    is_default  INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
    combination TEXT    NOT NULL CHECK (combination IN ('rank', 'normalised')),
    created_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

-- Exactly one default policy is enforced by the store code; at most one by
-- the schema.
CREATE UNIQUE INDEX scheduling_policies_one_default
    ON scheduling_policies (is_default) WHERE is_default = 1;

-- A policy's filters. position (oVirt's): -1 runs first, 1 runs last, 0 in
-- between, in the order they were added (rowid order). on_failure says what
-- a failing filter does to the decision. A unit in use cannot be deleted (no
-- ON DELETE on unit_id).
CREATE TABLE policy_filters (
    policy_id  TEXT    NOT NULL REFERENCES scheduling_policies (id) ON DELETE CASCADE,
    unit_id    TEXT    NOT NULL REFERENCES policy_units (id),
    position   INTEGER NOT NULL CHECK (position IN (-1, 0, 1)),
    on_failure TEXT    NOT NULL CHECK (on_failure IN ('fail_closed', 'fail_open')),
    PRIMARY KEY (policy_id, unit_id)
) STRICT;

CREATE UNIQUE INDEX policy_filters_one_first ON policy_filters (policy_id) WHERE position = -1;
CREATE UNIQUE INDEX policy_filters_one_last ON policy_filters (policy_id) WHERE position = 1;
CREATE INDEX policy_filters_by_unit ON policy_filters (unit_id);

-- A policy's score units (oVirt's weights) with their factors.
CREATE TABLE policy_weights (
    policy_id TEXT    NOT NULL REFERENCES scheduling_policies (id) ON DELETE CASCADE,
    unit_id   TEXT    NOT NULL REFERENCES policy_units (id),
    factor    INTEGER NOT NULL CHECK (factor BETWEEN 0 AND 4294967295),
    PRIMARY KEY (policy_id, unit_id)
) STRICT;

CREATE INDEX policy_weights_by_unit ON policy_weights (unit_id);

-- A policy's balance unit: at most one per policy.
CREATE TABLE policy_balances (
    policy_id TEXT NOT NULL PRIMARY KEY REFERENCES scheduling_policies (id) ON DELETE CASCADE,
    unit_id   TEXT NOT NULL REFERENCES policy_units (id)
) STRICT;

CREATE INDEX policy_balances_by_unit ON policy_balances (unit_id);

-- Parameter values a policy sets (oVirt's policy properties).
CREATE TABLE policy_params (
    policy_id TEXT NOT NULL REFERENCES scheduling_policies (id) ON DELETE CASCADE,
    name      TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (policy_id, name)
) STRICT;

-- Clusters and the policy each one runs. A policy attached to a cluster
-- cannot be deleted (no ON DELETE on policy_id).
CREATE TABLE clusters (
    id          TEXT NOT NULL PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL,
    policy_id   TEXT NOT NULL REFERENCES scheduling_policies (id),
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

CREATE INDEX clusters_by_policy ON clusters (policy_id);

-- A cluster's parameter overrides (oVirt's custom scheduling policy
-- properties): they win over the policy's values and the units' defaults.
CREATE TABLE cluster_params (
    cluster_id TEXT NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (cluster_id, name)
) STRICT;

-- Decisions made for a cluster, with their explain records. Retention is
-- bounded per cluster by the store (oldest rows go first).
CREATE TABLE decisions (
    id         TEXT NOT NULL PRIMARY KEY,
    cluster_id TEXT NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('schedule', 'balance')),
    vm_id      TEXT,
    host_id    TEXT,
    answer     TEXT NOT NULL, -- the JSON answer as returned, explain record included
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

CREATE INDEX decisions_by_cluster ON decisions (cluster_id, created_at);
