-- Every module a unit has run, newest last (issue #15, "unit versions and
-- rollback"): what describes the module (name, description, exports, score
-- order, parameters) as it was when the module was installed, so a
-- rollback restores all of it. The current version is the unit's highest;
-- a rollback adds a version (`rollback_of` names the one it restored)
-- rather than rewinding, so the history stays in the order things
-- happened. The modules of kept versions are kept with their compiled
-- code (`collect_module_garbage`); how many versions a unit keeps is
-- `sandpiper serve --unit-versions-retained`.
CREATE TABLE unit_versions (
    unit_id       TEXT    NOT NULL REFERENCES policy_units (id) ON DELETE CASCADE,
    version       INTEGER NOT NULL CHECK (version >= 1),
    module_sha256 TEXT    NOT NULL REFERENCES modules (sha256),
    name          TEXT    NOT NULL,
    description   TEXT    NOT NULL,
    has_filter    INTEGER NOT NULL CHECK (has_filter IN (0, 1)),
    has_score     INTEGER NOT NULL CHECK (has_score IN (0, 1)),
    has_balance   INTEGER NOT NULL CHECK (has_balance IN (0, 1)),
    score_order   TEXT    NOT NULL CHECK (score_order IN ('lower-is-better', 'higher-is-better')),
    -- The parameters as a JSON array of {name, description, default-value,
    -- pattern}, in declaration order.
    params        TEXT    NOT NULL,
    uploaded_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    uploaded_by   TEXT    NOT NULL,
    rollback_of   INTEGER,
    PRIMARY KEY (unit_id, version)
) STRICT;

-- Every unit's current module is its version 1.
INSERT INTO unit_versions (unit_id, version, module_sha256, name, description, has_filter,
                           has_score, has_balance, score_order, params, uploaded_at, uploaded_by)
SELECT u.id, 1, u.module_sha256, u.name, u.description, u.has_filter, u.has_score,
       u.has_balance, u.score_order,
       (SELECT json_group_array(json_object('name', p.name, 'description', p.description,
                                            'default-value', p.default_value,
                                            'pattern', p.pattern))
          FROM (SELECT * FROM unit_params WHERE unit_id = u.id ORDER BY position) p),
       u.uploaded_at, u.uploaded_by
FROM policy_units u;
