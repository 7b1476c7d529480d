-- no-transaction
-- The decisions log's answers packed (host/src/store/packed.rs): `answer`
-- holds bytes, zstd-compressed when that is smaller, and `answer_codec`
-- says which (`plain`: the UTF-8 text). A summary explain of ~7 KB packs
-- to ~650 bytes, so a row no longer spills into an overflow page, which
-- was most of what logging a decision cost the writer. `answer_bytes`
-- counts the bytes as stored, which the byte budget bounds. Rows logged
-- before keep their text, as `plain`.
--
-- A STRICT column's type cannot be altered, so the table is rebuilt by
-- SQLite's own procedure (https://sqlite.org/lang_altertable.html#otheralter):
-- outside a transaction, so that foreign keys can be turned off and
-- dropping the old table does not cascade to the claims and full answers
-- that refer to it; rowids kept, as they order the log.
PRAGMA foreign_keys = OFF;

BEGIN;

CREATE TABLE decisions_packed (
    id           TEXT    NOT NULL PRIMARY KEY,
    cluster_id   TEXT    NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    kind         TEXT    NOT NULL CHECK (kind IN ('schedule', 'balance')),
    vm_id        TEXT,
    host_id      TEXT,
    answer       BLOB    NOT NULL,
    answer_codec TEXT    NOT NULL CHECK (answer_codec IN ('plain', 'zstd')),
    created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    summarized   INTEGER NOT NULL DEFAULT 0 CHECK (summarized IN (0, 1)),
    answer_bytes INTEGER NOT NULL DEFAULT 0 CHECK (answer_bytes >= 0),
    request      TEXT
) STRICT;

INSERT INTO decisions_packed (rowid, id, cluster_id, kind, vm_id, host_id, answer,
                              answer_codec, created_at, summarized, answer_bytes, request)
    SELECT rowid, id, cluster_id, kind, vm_id, host_id, CAST(answer AS BLOB),
           'plain', created_at, summarized, answer_bytes, request
    FROM decisions;

DROP TABLE decisions;
ALTER TABLE decisions_packed RENAME TO decisions;

CREATE INDEX decisions_by_cluster ON decisions (cluster_id, created_at);
CREATE INDEX decisions_by_vm ON decisions (vm_id, created_at);
CREATE INDEX decisions_by_time ON decisions (created_at);

CREATE TRIGGER decisions_bytes_added AFTER INSERT ON decisions BEGIN
    UPDATE decision_log_bytes SET row_bytes = row_bytes + NEW.answer_bytes WHERE id = 0;
END;

CREATE TRIGGER decisions_bytes_removed AFTER DELETE ON decisions BEGIN
    UPDATE decision_log_bytes SET row_bytes = row_bytes - OLD.answer_bytes WHERE id = 0;
END;

COMMIT;

PRAGMA foreign_keys = ON;
