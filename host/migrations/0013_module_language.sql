-- The language a module was written in, as its producers sections tell
-- (`sandbox::language`: `rust`, `python`, `javascript`, `c`), shown with
-- each unit (issue #18's console lists units with their language). Read
-- once when the module is stored, from the bytes; NULL when the sections
-- say nothing known, and for modules stored before this migration until
-- they are stored again (built-in units are, at every start).
ALTER TABLE modules ADD COLUMN language TEXT;
