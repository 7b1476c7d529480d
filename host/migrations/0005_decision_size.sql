-- Decision rows have a size bound (issue #11): each row records its size,
-- so the log can be trimmed to a byte budget per cluster as well as to a
-- count and an age, and a decision whose answer is too large for a row
-- (an inline schedule over 100,000 hosts explains itself in ~47 MB) keeps
-- a bounded summary there and its full answer here, in a table with a
-- byte budget of its own, for as long as both are retained.
ALTER TABLE decisions
    ADD COLUMN size_bytes INTEGER NOT NULL DEFAULT 0 CHECK (size_bytes >= 0);

UPDATE decisions SET size_bytes =
    length(CAST(answer AS BLOB))
    + coalesce(length(CAST(vm_id AS BLOB)), 0)
    + coalesce(length(CAST(host_id AS BLOB)), 0);

CREATE TABLE decision_details (
    decision_id TEXT    NOT NULL PRIMARY KEY REFERENCES decisions (id) ON DELETE CASCADE,
    answer      TEXT    NOT NULL, -- the full JSON answer as returned
    size_bytes  INTEGER NOT NULL CHECK (size_bytes >= 0)
) STRICT;
