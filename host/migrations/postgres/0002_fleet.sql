-- The fleet: several replicas sharing this database (docs/fleet.md).
-- PostgreSQL only: an SQLite file has one process, which owns every cluster.

-- Which replica decides for each cluster, until when. A replica takes an
-- expired (or absent) row, renews its own rows every second, and writes a
-- cluster's placement rows only while its row still carries the epoch it
-- took it with (the writer's fence, store/fleet.rs). Times are the
-- database's clock, so replicas' clocks need not agree.
CREATE TABLE cluster_owners (
    cluster_id TEXT        NOT NULL PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    replica_id TEXT        NOT NULL,
    url        TEXT        NOT NULL,
    epoch      BIGINT      NOT NULL CHECK (epoch >= 1),
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX cluster_owners_by_replica ON cluster_owners (replica_id);

-- Bumped after every admin change, so the other replicas reload units and
-- policies (each polls it every second).
CREATE TABLE config_generation (
    id         BIGINT NOT NULL PRIMARY KEY CHECK (id = 0),
    generation BIGINT NOT NULL
);

INSERT INTO config_generation (id, generation) VALUES (0, 0);

-- An operation's `seq` orders its cluster's queue. Each replica numbers
-- the operations of the clusters it owns, continuing after the highest
-- stored for the cluster when it takes one over, so the number is unique
-- per cluster rather than fleet-wide.
ALTER TABLE operations DROP CONSTRAINT operations_seq_key;
CREATE UNIQUE INDEX operations_cluster_seq ON operations (cluster_id, seq);
