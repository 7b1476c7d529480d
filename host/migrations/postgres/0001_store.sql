-- Sandpiper's store on PostgreSQL (issue #13): the twin of the SQLite
-- migrations host/migrations/0001_store.sql ... 0011_unit_versions.sql,
-- written as the schema they end in (a fresh backend has no history to
-- replay, so their data-moving steps have nothing to do here). The two
-- folders describe one schema: EVERY LATER SCHEMA CHANGE MUST BE MADE IN
-- BOTH, as a migration of the same number.
--
-- The comments on what each table holds are in the SQLite files; the ones
-- here say how the translation differs. The rules:
--
-- * Types: INTEGER -> BIGINT (0/1 flags included: the code binds and reads
--   them as i64 through sqlx's Any driver, which does not convert BOOLEAN);
--   BLOB -> BYTEA; TEXT stays TEXT. SQLite's STRICT is what PostgreSQL
--   does anyway. NOT NULL, DEFAULTs, CHECKs, keys and ON DELETE actions are
--   as in SQLite, and so are column order and index names.
-- * rowid: the statements order and trim several tables by SQLite's
--   implicit rowid (insertion order). Every table that has one in SQLite
--   (all but audit_log and decision_log_bytes, whose INTEGER PRIMARY KEY
--   *is* their rowid) has an explicit `rowid BIGINT GENERATED ALWAYS AS
--   IDENTITY` here, as its last column, so the same statement text works on
--   both. An upsert (ON CONFLICT DO UPDATE) keeps a row's rowid, as in
--   SQLite. It is indexed only where statements order or filter by it.
--   SQLite's secondary indexes end in the rowid implicitly; the decisions
--   indexes whose order the log's page follows (created_at, then rowid)
--   name it explicitly here.
-- * Times: SQLite's strftime('%Y-%m-%dT%H:%M:%fZ', 'now') becomes
--   to_char(statement_timestamp() AT TIME ZONE 'UTC',
--   'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), the same text to the millisecond
--   (2026-11-27T05:02:44.123Z). statement_timestamp(), not now(): SQLite's
--   'now' is the time of the current statement, and now() would give every
--   statement of a long transaction (the background writer's batches) the
--   time the transaction began.
-- * Names unique regardless of case (SQLite's `COLLATE NOCASE` indexes of
--   migrations 0004 and 0008) are unique indexes on lower(name), which the
--   lookups `lower(name) = lower($1)` use. NOCASE folds ASCII only; lower()
--   folds as the database's LC_CTYPE says, so on a database created with
--   LC_CTYPE 'C' the rule is exactly SQLite's, and on a Unicode-aware one
--   it is stricter for non-ASCII letters (`É` and `é` are one name). The
--   index and the lookups fold alike either way. Likewise ORDER BY on TEXT
--   follows the database's LC_COLLATE; only 'C' orders as SQLite's BINARY.
-- * The plain UNIQUE on those names (0001) stays, as in SQLite.
-- * length() of TEXT counts characters in both databases (the sha256
--   checks). No other SQLite-only function is left in a DEFAULT or CHECK;
--   the four triggers of 0005 are PL/pgSQL below.

-- 0001, 0006 (`wasm` moved to module_chunks).
CREATE TABLE modules (
    sha256      TEXT   NOT NULL PRIMARY KEY CHECK (length(sha256) = 64),
    size_bytes  BIGINT NOT NULL CHECK (size_bytes >= 0),
    created_at  TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY
);

-- 0001, 0006 (`artifact` moved to artifact_chunks, `size_bytes` added).
CREATE TABLE artifacts (
    module_sha256 TEXT   NOT NULL REFERENCES modules (sha256) ON DELETE CASCADE,
    engine_hash   TEXT   NOT NULL,
    created_at    TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    size_bytes    BIGINT NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (module_sha256, engine_hash)
);

-- 0001.
CREATE TABLE tokens (
    id           TEXT   NOT NULL PRIMARY KEY,
    name         TEXT   NOT NULL,
    role         TEXT   NOT NULL CHECK (role IN ('admin', 'engine', 'reader')),
    token_sha256 TEXT   NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
    created_at   TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    revoked_at   TEXT,
    rowid        BIGINT GENERATED ALWAYS AS IDENTITY
);

-- 0001, 0004 (policy_units_name_nocase).
CREATE TABLE policy_units (
    id            TEXT   NOT NULL PRIMARY KEY,
    name          TEXT   NOT NULL UNIQUE,
    description   TEXT   NOT NULL,
    internal      BIGINT NOT NULL CHECK (internal IN (0, 1)),
    enabled       BIGINT NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    has_filter    BIGINT NOT NULL CHECK (has_filter IN (0, 1)),
    has_score     BIGINT NOT NULL CHECK (has_score IN (0, 1)),
    has_balance   BIGINT NOT NULL CHECK (has_balance IN (0, 1)),
    score_order   TEXT   NOT NULL CHECK (score_order IN ('lower-is-better', 'higher-is-better')),
    module_sha256 TEXT   NOT NULL REFERENCES modules (sha256),
    uploaded_at   TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    uploaded_by   TEXT   NOT NULL,
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY
);

CREATE UNIQUE INDEX policy_units_name_nocase ON policy_units (lower(name));

-- 0001.
CREATE TABLE unit_params (
    unit_id       TEXT   NOT NULL REFERENCES policy_units (id) ON DELETE CASCADE,
    position      BIGINT NOT NULL,
    name          TEXT   NOT NULL,
    description   TEXT   NOT NULL,
    default_value TEXT   NOT NULL,
    pattern       TEXT   NOT NULL,
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (unit_id, name),
    UNIQUE (unit_id, position)
);

-- 0001, 0004 (scheduling_policies_name_nocase).
CREATE TABLE scheduling_policies (
    id          TEXT   NOT NULL PRIMARY KEY,
    name        TEXT   NOT NULL UNIQUE,
    description TEXT   NOT NULL,
    locked      BIGINT NOT NULL DEFAULT 0 CHECK (locked IN (0, 1)),
    is_default  BIGINT NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
    combination TEXT   NOT NULL CHECK (combination IN ('rank', 'normalised')),
    created_at  TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    updated_at  TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY
);

CREATE UNIQUE INDEX scheduling_policies_one_default
    ON scheduling_policies (is_default) WHERE is_default = 1;
CREATE UNIQUE INDEX scheduling_policies_name_nocase ON scheduling_policies (lower(name));

-- 0001, 0003 (run_once). Filters run in the order they were added: the
-- statements read a policy's filters `ORDER BY rowid`.
CREATE TABLE policy_filters (
    policy_id  TEXT   NOT NULL REFERENCES scheduling_policies (id) ON DELETE CASCADE,
    unit_id    TEXT   NOT NULL REFERENCES policy_units (id),
    position   BIGINT NOT NULL CHECK (position IN (-1, 0, 1)),
    on_failure TEXT   NOT NULL CHECK (on_failure IN ('fail_closed', 'fail_open')),
    run_once   BIGINT NOT NULL DEFAULT 0 CHECK (run_once IN (0, 1)),
    rowid      BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (policy_id, unit_id)
);

CREATE UNIQUE INDEX policy_filters_one_first ON policy_filters (policy_id) WHERE position = -1;
CREATE UNIQUE INDEX policy_filters_one_last ON policy_filters (policy_id) WHERE position = 1;
CREATE INDEX policy_filters_by_unit ON policy_filters (unit_id);
-- PostgreSQL only: `WHERE policy_id = $1 ORDER BY rowid`.
CREATE INDEX policy_filters_by_policy_rowid ON policy_filters (policy_id, rowid);

-- 0001, 0005 (on_failure). Read `WHERE policy_id = $1 ORDER BY rowid`.
CREATE TABLE policy_weights (
    policy_id  TEXT   NOT NULL REFERENCES scheduling_policies (id) ON DELETE CASCADE,
    unit_id    TEXT   NOT NULL REFERENCES policy_units (id),
    factor     BIGINT NOT NULL CHECK (factor BETWEEN 0 AND 4294967295),
    on_failure TEXT   NOT NULL DEFAULT 'fail_open'
        CHECK (on_failure IN ('fail_closed', 'fail_open')),
    rowid      BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (policy_id, unit_id)
);

CREATE INDEX policy_weights_by_unit ON policy_weights (unit_id);
-- PostgreSQL only: `WHERE policy_id = $1 ORDER BY rowid`.
CREATE INDEX policy_weights_by_policy_rowid ON policy_weights (policy_id, rowid);

-- 0001.
CREATE TABLE policy_balances (
    policy_id TEXT   NOT NULL PRIMARY KEY REFERENCES scheduling_policies (id) ON DELETE CASCADE,
    unit_id   TEXT   NOT NULL REFERENCES policy_units (id),
    rowid     BIGINT GENERATED ALWAYS AS IDENTITY
);

CREATE INDEX policy_balances_by_unit ON policy_balances (unit_id);

-- 0001.
CREATE TABLE policy_params (
    policy_id TEXT   NOT NULL REFERENCES scheduling_policies (id) ON DELETE CASCADE,
    name      TEXT   NOT NULL,
    value     TEXT   NOT NULL,
    rowid     BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (policy_id, name)
);

-- 0001, 0004 (clusters_name_nocase), 0009 (periodic balance).
CREATE TABLE clusters (
    id                       TEXT   NOT NULL PRIMARY KEY,
    name                     TEXT   NOT NULL UNIQUE,
    description              TEXT   NOT NULL,
    policy_id                TEXT   NOT NULL REFERENCES scheduling_policies (id),
    created_at               TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    updated_at               TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    periodic_balance         BIGINT NOT NULL DEFAULT 1 CHECK (periodic_balance IN (0, 1)),
    balance_interval_seconds BIGINT NOT NULL DEFAULT 60
        CHECK (balance_interval_seconds BETWEEN 1 AND 86400),
    rowid                    BIGINT GENERATED ALWAYS AS IDENTITY
);

CREATE INDEX clusters_by_policy ON clusters (policy_id);
CREATE UNIQUE INDEX clusters_name_nocase ON clusters (lower(name));

-- 0001.
CREATE TABLE cluster_params (
    cluster_id TEXT   NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    name       TEXT   NOT NULL,
    value      TEXT   NOT NULL,
    rowid      BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (cluster_id, name)
);

-- 0001, 0002 (indexes by vm and time), 0005 (summarized, answer_bytes).
-- The log is listed and trimmed by rowid: `WHERE cluster_id = $1 ORDER BY
-- rowid DESC`, the byte budget's walk over the whole log `ORDER BY rowid
-- DESC` and `rowid IN (...)`, and the page `ORDER BY created_at DESC,
-- rowid DESC`.
CREATE TABLE decisions (
    id           TEXT   NOT NULL PRIMARY KEY,
    cluster_id   TEXT   NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    kind         TEXT   NOT NULL CHECK (kind IN ('schedule', 'balance')),
    vm_id        TEXT,
    host_id      TEXT,
    answer       TEXT   NOT NULL,
    created_at   TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    summarized   BIGINT NOT NULL DEFAULT 0 CHECK (summarized IN (0, 1)),
    answer_bytes BIGINT NOT NULL DEFAULT 0 CHECK (answer_bytes >= 0),
    rowid        BIGINT GENERATED ALWAYS AS IDENTITY
);

-- As SQLite's, with the rowid SQLite appends implicitly written out.
CREATE INDEX decisions_by_cluster ON decisions (cluster_id, created_at, rowid);
CREATE INDEX decisions_by_vm ON decisions (vm_id, created_at, rowid);
CREATE INDEX decisions_by_time ON decisions (created_at, rowid);
-- PostgreSQL only: the rowid lookups SQLite's table b-tree serves.
CREATE UNIQUE INDEX decisions_rowid ON decisions (rowid);
CREATE INDEX decisions_by_cluster_rowid ON decisions (cluster_id, rowid);

-- 0002. Snapshot order is rowid order: `WHERE cluster_id = $1 ORDER BY rowid`.
CREATE TABLE inventory_clusters (
    cluster_id          TEXT   NOT NULL PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    generation          BIGINT NOT NULL CHECK (generation >= 0),
    snapshot_generation BIGINT NOT NULL CHECK (snapshot_generation >= 0),
    rowid               BIGINT GENERATED ALWAYS AS IDENTITY
);

CREATE TABLE inventory_hosts (
    cluster_id TEXT   NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    host_id    TEXT   NOT NULL,
    generation BIGINT NOT NULL CHECK (generation >= 0),
    record     TEXT   NOT NULL,
    rowid      BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (cluster_id, host_id)
);

-- PostgreSQL only: `WHERE cluster_id = $1 ORDER BY rowid`.
CREATE INDEX inventory_hosts_by_cluster_rowid ON inventory_hosts (cluster_id, rowid);

CREATE TABLE inventory_removed (
    cluster_id TEXT   NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    host_id    TEXT   NOT NULL,
    generation BIGINT NOT NULL CHECK (generation >= 0),
    rowid      BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (cluster_id, host_id)
);

-- 0002.
CREATE TABLE claims (
    cluster_id    TEXT   NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    vm_id         TEXT   NOT NULL,
    host_id       TEXT   NOT NULL,
    resources     TEXT   NOT NULL,
    decision_id   TEXT   NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    covered_from  BIGINT,
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (cluster_id, vm_id)
);

-- 0002. A decision's claims are read `ORDER BY rowid` (the log's page).
CREATE TABLE decision_claims (
    decision_id TEXT   NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
    vm_id       TEXT   NOT NULL,
    host_id     TEXT   NOT NULL,
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (decision_id, vm_id)
);

CREATE INDEX decision_claims_by_vm ON decision_claims (vm_id);
-- PostgreSQL only: `WHERE decision_id = ... ORDER BY rowid`.
CREATE INDEX decision_claims_by_decision_rowid ON decision_claims (decision_id, rowid);

-- 0005. The byte budget's walk drops the oldest first: `ORDER BY rowid
-- DESC` over the whole table and `rowid IN (...)`.
CREATE TABLE decision_answers (
    decision_id TEXT   NOT NULL PRIMARY KEY REFERENCES decisions (id) ON DELETE CASCADE,
    bytes       BIGINT NOT NULL CHECK (bytes >= 0),
    answer      TEXT   NOT NULL,
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY
);

-- PostgreSQL only: the rowid lookups SQLite's table b-tree serves.
CREATE UNIQUE INDEX decision_answers_rowid ON decision_answers (rowid);

-- 0005. One row (id 0). SQLite's `id INTEGER PRIMARY KEY` is a rowid
-- alias, but CHECK (id = 0) leaves it nothing to generate (SQLite's next
-- rowid, 1, fails the check, as an identity's first value would), so it is
-- a plain BIGINT key here, and the table has no other rowid.
CREATE TABLE decision_log_bytes (
    id         BIGINT NOT NULL PRIMARY KEY CHECK (id = 0),
    row_bytes  BIGINT NOT NULL,
    full_bytes BIGINT NOT NULL
);

-- The log starts empty (0005 summed the rows already there).
INSERT INTO decision_log_bytes (id, row_bytes, full_bytes) VALUES (0, 0, 0);

-- 0005's four triggers keep decision_log_bytes equal to the sums of
-- decisions.answer_bytes and decision_answers.bytes, cascaded deletes
-- included (PostgreSQL fires triggers for them too, as SQLite does).
-- SQLite's run once per row; these run once per statement over its
-- transition table, which adds the same sums but updates the one counter
-- row once per statement rather than once per row (a trim deletes
-- thousands), and not at all when the statement touched no row, as no
-- SQLite row trigger would have fired.
CREATE FUNCTION decisions_bytes_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        UPDATE decision_log_bytes
            SET row_bytes = row_bytes + (SELECT sum(answer_bytes) FROM changed)::BIGINT
            WHERE id = 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION decisions_bytes_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        UPDATE decision_log_bytes
            SET row_bytes = row_bytes - (SELECT sum(answer_bytes) FROM changed)::BIGINT
            WHERE id = 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION decision_answers_bytes_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        UPDATE decision_log_bytes
            SET full_bytes = full_bytes + (SELECT sum(bytes) FROM changed)::BIGINT
            WHERE id = 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION decision_answers_bytes_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        UPDATE decision_log_bytes
            SET full_bytes = full_bytes - (SELECT sum(bytes) FROM changed)::BIGINT
            WHERE id = 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER decisions_bytes_added AFTER INSERT ON decisions
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION decisions_bytes_added();

CREATE TRIGGER decisions_bytes_removed AFTER DELETE ON decisions
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION decisions_bytes_removed();

CREATE TRIGGER decision_answers_bytes_added AFTER INSERT ON decision_answers
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION decision_answers_bytes_added();

CREATE TRIGGER decision_answers_bytes_removed AFTER DELETE ON decision_answers
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION decision_answers_bytes_removed();

-- 0006.
CREATE TABLE module_chunks (
    module_sha256 TEXT   NOT NULL REFERENCES modules (sha256) ON DELETE CASCADE,
    seq           BIGINT NOT NULL CHECK (seq >= 0),
    bytes         BYTEA  NOT NULL,
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (module_sha256, seq)
);

CREATE TABLE artifact_chunks (
    module_sha256 TEXT   NOT NULL,
    engine_hash   TEXT   NOT NULL,
    seq           BIGINT NOT NULL CHECK (seq >= 0),
    bytes         BYTEA  NOT NULL,
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (module_sha256, engine_hash, seq),
    FOREIGN KEY (module_sha256, engine_hash)
        REFERENCES artifacts (module_sha256, engine_hash) ON DELETE CASCADE
);

-- 0007.
CREATE TABLE operations (
    id                  TEXT   NOT NULL PRIMARY KEY,
    cluster_id          TEXT   NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    seq                 BIGINT NOT NULL UNIQUE CHECK (seq >= 0),
    kind                TEXT   NOT NULL,
    priority            BIGINT NOT NULL CHECK (priority BETWEEN -20 AND 19),
    locks               TEXT   NOT NULL,
    payload             TEXT   NOT NULL,
    origin              TEXT   NOT NULL CHECK (origin IN ('engine', 'balance', 'pool')),
    pool_id             TEXT,
    vm_id               TEXT,
    state               TEXT   NOT NULL
        CHECK (state IN ('queued', 'leased', 'succeeded', 'failed', 'cancelled')),
    attempts            BIGINT NOT NULL CHECK (attempts >= 0),
    submitted_at_ms     BIGINT NOT NULL,
    lease_id            TEXT,
    lease_holder        TEXT,
    lease_expires_at_ms BIGINT,
    finished_at_ms      BIGINT,
    outcome             TEXT,
    rowid               BIGINT GENERATED ALWAYS AS IDENTITY,
    CHECK (state <> 'leased' OR lease_id IS NOT NULL),
    CHECK (state <> 'queued' OR lease_id IS NULL),
    CHECK ((origin = 'pool') = (pool_id IS NOT NULL))
);

CREATE INDEX operations_by_state ON operations (cluster_id, state, seq);

-- 0008.
CREATE TABLE vm_pools (
    id             TEXT   NOT NULL PRIMARY KEY,
    name           TEXT   NOT NULL,
    description    TEXT   NOT NULL,
    cluster_id     TEXT   NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    size           BIGINT NOT NULL CHECK (size BETWEEN 1 AND 1000),
    prestarted_vms BIGINT NOT NULL CHECK (prestarted_vms >= 0 AND prestarted_vms <= size),
    stateful       BIGINT NOT NULL CHECK (stateful IN (0, 1)),
    vm             TEXT   NOT NULL,
    last_run       TEXT,
    created_at     TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    updated_at     TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    rowid          BIGINT GENERATED ALWAYS AS IDENTITY
);

CREATE UNIQUE INDEX vm_pools_name_nocase ON vm_pools (lower(name));
CREATE INDEX vm_pools_by_cluster ON vm_pools (cluster_id);

CREATE TABLE vm_pool_members (
    pool_id            TEXT   NOT NULL REFERENCES vm_pools (id) ON DELETE CASCADE,
    idx                BIGINT NOT NULL CHECK (idx >= 1),
    vm_id              TEXT   NOT NULL UNIQUE,
    assigned_to        TEXT,
    start_operation_id TEXT,
    host_id            TEXT,
    rowid              BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (pool_id, idx)
);

-- 0010. SQLite's `id INTEGER PRIMARY KEY AUTOINCREMENT` is the rowid
-- itself: an identity key here (never reused, as AUTOINCREMENT's), and no
-- separate rowid column.
CREATE TABLE audit_log (
    id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at          TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    token_id    TEXT   NOT NULL,
    token_name  TEXT   NOT NULL,
    role        TEXT   NOT NULL,
    method      TEXT   NOT NULL,
    route       TEXT   NOT NULL,
    target      TEXT   NOT NULL,
    status      BIGINT NOT NULL,
    error_code  TEXT,
    request_id  TEXT
);

CREATE INDEX audit_log_at ON audit_log (at);

-- 0011 (its copy of each unit's module as version 1 has nothing to copy on
-- a fresh database).
CREATE TABLE unit_versions (
    unit_id       TEXT   NOT NULL REFERENCES policy_units (id) ON DELETE CASCADE,
    version       BIGINT NOT NULL CHECK (version >= 1),
    module_sha256 TEXT   NOT NULL REFERENCES modules (sha256),
    name          TEXT   NOT NULL,
    description   TEXT   NOT NULL,
    has_filter    BIGINT NOT NULL CHECK (has_filter IN (0, 1)),
    has_score     BIGINT NOT NULL CHECK (has_score IN (0, 1)),
    has_balance   BIGINT NOT NULL CHECK (has_balance IN (0, 1)),
    score_order   TEXT   NOT NULL CHECK (score_order IN ('lower-is-better', 'higher-is-better')),
    params        TEXT   NOT NULL,
    uploaded_at   TEXT   NOT NULL
        DEFAULT to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    uploaded_by   TEXT   NOT NULL,
    rollback_of   BIGINT,
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (unit_id, version)
);
