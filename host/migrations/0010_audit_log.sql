-- The audit log (issue #15): every change an admin route was asked to make
-- (tokens, units, policies, clusters, pools), who asked, and what came of
-- it. Rows are only added and, past the retention, deleted oldest first;
-- the id orders them and pages the listing.
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    token_id    TEXT    NOT NULL,
    token_name  TEXT    NOT NULL,
    role        TEXT    NOT NULL,
    method      TEXT    NOT NULL,
    -- The route as declared, e.g. `/api/v1/schedulingpolicies/{id}`.
    route       TEXT    NOT NULL,
    -- What was changed: the created resource's `Location`, else the path.
    target      TEXT    NOT NULL,
    status      INTEGER NOT NULL,
    -- The API error code when the change was refused or failed.
    error_code  TEXT,
    request_id  TEXT
);
CREATE INDEX audit_log_at ON audit_log (at);
