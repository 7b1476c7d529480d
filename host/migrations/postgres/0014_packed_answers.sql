-- The twin of host/migrations/0014_packed_answers.sql (whose comment says
-- why): the decisions log's answers as bytes, zstd-compressed when that is
-- smaller, with `answer_codec` saying which. PostgreSQL's own compression
-- (TOAST) starts at 2 KB and rows below it stay as they are; the packing
-- is done before either store sees the row.
ALTER TABLE decisions ALTER COLUMN answer TYPE BYTEA USING convert_to(answer, 'UTF8');
ALTER TABLE decisions ADD COLUMN answer_codec TEXT NOT NULL DEFAULT 'plain'
    CHECK (answer_codec IN ('plain', 'zstd'));
ALTER TABLE decisions ALTER COLUMN answer_codec DROP DEFAULT;
