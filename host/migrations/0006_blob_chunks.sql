-- Module bytes and compiled code stored in chunks of about a megabyte
-- instead of one blob per row (issue #11). SQLite binds, copies and builds
-- a record around a whole blob in memory, so storing a 63 MiB upload in
-- one piece cost the server several copies of it at once, and reading one
-- back two more; chunks are written and read one at a time. The same
-- tables work on PostgreSQL (issue #13), whose large objects sqlx does not
-- stream either.
--
-- A blob is its chunks in `seq` order (0, 1, ...); chunks need not be of
-- one size. `size_bytes` on the owning row is the total, checked on read.

CREATE TABLE module_chunks (
    module_sha256 TEXT    NOT NULL REFERENCES modules (sha256) ON DELETE CASCADE,
    seq           INTEGER NOT NULL CHECK (seq >= 0),
    bytes         BLOB    NOT NULL,
    PRIMARY KEY (module_sha256, seq)
) STRICT;

-- Every stored module, cut into 1 MiB chunks. `substr` counts bytes in a
-- blob. (It reads the whole blob for each chunk: quadratic, but once, and
-- a few tenths of a second for the largest module.)
WITH RECURSIVE parts (sha256, seq, size) AS (
    SELECT sha256, 0, length(wasm) FROM modules
    UNION ALL
    SELECT sha256, seq + 1, size FROM parts WHERE (seq + 1) * 1048576 < size
)
INSERT INTO module_chunks (module_sha256, seq, bytes)
SELECT p.sha256, p.seq, substr(m.wasm, p.seq * 1048576 + 1, 1048576)
FROM parts p JOIN modules m ON m.sha256 = p.sha256;

ALTER TABLE modules DROP COLUMN wasm;

ALTER TABLE artifacts ADD COLUMN size_bytes INTEGER NOT NULL DEFAULT 0 CHECK (size_bytes >= 0);
UPDATE artifacts SET size_bytes = length(artifact);

CREATE TABLE artifact_chunks (
    module_sha256 TEXT    NOT NULL,
    engine_hash   TEXT    NOT NULL,
    seq           INTEGER NOT NULL CHECK (seq >= 0),
    bytes         BLOB    NOT NULL,
    PRIMARY KEY (module_sha256, engine_hash, seq),
    FOREIGN KEY (module_sha256, engine_hash)
        REFERENCES artifacts (module_sha256, engine_hash) ON DELETE CASCADE
) STRICT;

WITH RECURSIVE parts (sha256, engine_hash, seq, size) AS (
    SELECT module_sha256, engine_hash, 0, size_bytes FROM artifacts
    UNION ALL
    SELECT sha256, engine_hash, seq + 1, size FROM parts WHERE (seq + 1) * 1048576 < size
)
INSERT INTO artifact_chunks (module_sha256, engine_hash, seq, bytes)
SELECT p.sha256, p.engine_hash, p.seq, substr(a.artifact, p.seq * 1048576 + 1, 1048576)
FROM parts p JOIN artifacts a ON a.module_sha256 = p.sha256 AND a.engine_hash = p.engine_hash;

ALTER TABLE artifacts DROP COLUMN artifact;
