-- A user's first search reads every chunk's terms (the packed keyword
-- terms) and never its text; the text is read for the few chunks a search
-- returns. A chunk of 1,500 characters of little-compressible text holds
-- a row over PostgreSQL's 2 kB limit, and TOAST moved its largest value
-- out of line: the terms, so that reading them cost one TOAST lookup a
-- chunk. MAIN keeps the terms in the row (compressed if they must be, out
-- of line only as a last resort), so the text moves out instead. Rows
-- stored before keep their layout until they are rewritten.
ALTER TABLE chunks ALTER COLUMN terms SET STORAGE MAIN;
