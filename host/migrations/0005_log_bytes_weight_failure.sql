-- Two items of issue #11.
--
-- 1. The decisions log bounded by bytes. A decision over 100,000 inline
-- hosts answered a 46.6 MB explain record, and the log kept it in its row,
-- so listing one decision returned 42 MB. Now a row holds the answer when
-- it is small and a bounded summary when it is not (`summarized` = 1); the
-- answer as returned is then kept apart, in `decision_answers`, which
-- listing never reads. `answer_bytes` and `bytes` are the UTF-8 sizes of
-- the two texts, and `decision_log_bytes` keeps their totals (maintained
-- by the triggers below, cascades included) so that the writer checks the
-- byte budget without summing the log (crate::store::decisions).
ALTER TABLE decisions
    ADD COLUMN summarized INTEGER NOT NULL DEFAULT 0 CHECK (summarized IN (0, 1));
ALTER TABLE decisions
    ADD COLUMN answer_bytes INTEGER NOT NULL DEFAULT 0 CHECK (answer_bytes >= 0);
UPDATE decisions SET answer_bytes = length(CAST(answer AS BLOB));

-- The answer of a summarized decision as it was returned, kept while the
-- log's byte budget allows (the oldest go first). `bytes` precedes the
-- text so that the budget's walk reads it without the text's pages.
CREATE TABLE decision_answers (
    decision_id TEXT    NOT NULL PRIMARY KEY REFERENCES decisions (id) ON DELETE CASCADE,
    bytes       INTEGER NOT NULL CHECK (bytes >= 0),
    answer      TEXT    NOT NULL
) STRICT;

-- One row: the bytes of the log's rows and of the answers kept apart.
CREATE TABLE decision_log_bytes (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 0),
    row_bytes  INTEGER NOT NULL,
    full_bytes INTEGER NOT NULL
) STRICT;

INSERT INTO decision_log_bytes (id, row_bytes, full_bytes)
    VALUES (0, (SELECT coalesce(sum(answer_bytes), 0) FROM decisions), 0);

CREATE TRIGGER decisions_bytes_added AFTER INSERT ON decisions BEGIN
    UPDATE decision_log_bytes SET row_bytes = row_bytes + NEW.answer_bytes WHERE id = 0;
END;

CREATE TRIGGER decisions_bytes_removed AFTER DELETE ON decisions BEGIN
    UPDATE decision_log_bytes SET row_bytes = row_bytes - OLD.answer_bytes WHERE id = 0;
END;

CREATE TRIGGER decision_answers_bytes_added AFTER INSERT ON decision_answers BEGIN
    UPDATE decision_log_bytes SET full_bytes = full_bytes + NEW.bytes WHERE id = 0;
END;

CREATE TRIGGER decision_answers_bytes_removed AFTER DELETE ON decision_answers BEGIN
    UPDATE decision_log_bytes SET full_bytes = full_bytes - OLD.bytes WHERE id = 0;
END;

-- 2. What a failing weight does to the decision, as filters have had from
-- the start: `fail_open` (left out of the totals and listed as degraded,
-- the behaviour before this column) or `fail_closed` (the request fails).
ALTER TABLE policy_weights
    ADD COLUMN on_failure TEXT NOT NULL DEFAULT 'fail_open'
        CHECK (on_failure IN ('fail_closed', 'fail_open'));
