-- The twin of host/migrations/0013_module_language.sql (whose comment
-- says why): the language a module was written in, when its producers
-- sections tell.
ALTER TABLE modules ADD COLUMN language TEXT;
