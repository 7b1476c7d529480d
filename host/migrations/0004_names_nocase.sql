-- Names of units, policies and clusters are unique regardless of (ASCII)
-- case, as the API checks (host/src/names.rs): `CPU` and `cpu` are one
-- name. The lookups the API makes compare with `COLLATE NOCASE` too, so
-- these indexes serve them.
--
-- A database written before this rule may already hold names differing
-- only in case. The oldest row (lowest rowid) keeps its name; each later
-- one is renamed to `name (id)`, which is unique because the id is, so the
-- upgrade never fails and nothing is lost. Built-in names do not clash.

UPDATE policy_units SET name = name || ' (' || id || ')'
WHERE rowid NOT IN (SELECT min(rowid) FROM policy_units GROUP BY name COLLATE NOCASE);
CREATE UNIQUE INDEX policy_units_name_nocase ON policy_units (name COLLATE NOCASE);

UPDATE scheduling_policies SET name = name || ' (' || id || ')'
WHERE rowid NOT IN (SELECT min(rowid) FROM scheduling_policies GROUP BY name COLLATE NOCASE);
CREATE UNIQUE INDEX scheduling_policies_name_nocase ON scheduling_policies (name COLLATE NOCASE);

UPDATE clusters SET name = name || ' (' || id || ')'
WHERE rowid NOT IN (SELECT min(rowid) FROM clusters GROUP BY name COLLATE NOCASE);
CREATE UNIQUE INDEX clusters_name_nocase ON clusters (name COLLATE NOCASE);
