//! Policy units: what each one is called, which roles its module exports,
//! the parameters it declares, and which module it runs.

use sandpiper_model::{ParamSpec, ScoreOrder};
use uuid::Uuid;

use super::rows::row_struct;
use super::{Db, StoreError, flag, parse_id};
use crate::unit::Exports;

/// A stored unit.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitRecord {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// Built into the server: cannot be deleted, replaced or disabled.
    pub internal: bool,
    /// A disabled unit is skipped by decisions and cannot join policies.
    pub enabled: bool,
    pub exports: Exports,
    pub score_order: ScoreOrder,
    pub params: Vec<ParamSpec>,
    pub module_sha256: String,
    pub module_size_bytes: u64,
    /// What the module's producers sections say it was written in
    /// (`crate::sandbox::language`), when they say.
    pub module_language: Option<String>,
    pub uploaded_at: String,
    /// Name of the token that uploaded it, or `builtin`.
    pub uploaded_by: String,
}

/// Versions a unit keeps by default: its current one and the nine before.
pub const DEFAULT_UNIT_VERSIONS_RETAINED: u32 = 10;

/// One module a unit has run, as it was installed.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitVersion {
    pub version: i64,
    pub module: UnitModule,
    pub module_size_bytes: u64,
    pub module_language: Option<String>,
    pub uploaded_at: String,
    /// The version this one restored, when it came from a rollback.
    pub rollback_of: Option<i64>,
}

/// What describes a unit's module; replaced together with the module.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitModule {
    pub name: String,
    pub description: String,
    pub exports: Exports,
    pub score_order: ScoreOrder,
    pub params: Vec<ParamSpec>,
    pub module_sha256: String,
    pub uploaded_by: String,
}

row_struct! {
    struct Row {
        id: String,
        name: String,
        description: String,
        internal: i64,
        enabled: i64,
        has_filter: i64,
        has_score: i64,
        has_balance: i64,
        score_order: String,
        module_sha256: String,
        size_bytes: i64,
        language: Option<String>,
        uploaded_at: String,
        uploaded_by: String,
    }
}

row_struct! {
    struct ParamRow {
        name: String,
        description: String,
        default_value: String,
        pattern: String,
    }
}

const SELECT: &str = "SELECT u.id, u.name, u.description, u.internal, u.enabled, \
     u.has_filter, u.has_score, u.has_balance, u.score_order, u.module_sha256, \
     m.size_bytes, m.language, u.uploaded_at, u.uploaded_by \
     FROM policy_units u JOIN modules m ON m.sha256 = u.module_sha256";

/// The roles a unit or version row says its module exports.
fn exports(filter: i64, score: i64, balance: i64) -> Exports {
    Exports {
        filter: flag(filter),
        score: flag(score),
        balance: flag(balance),
    }
}

fn score_order(text: &str) -> Result<ScoreOrder, StoreError> {
    ScoreOrder::from_wit_name(text)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown score order `{text}`")))
}

async fn complete(conn: &mut sqlx::AnyConnection, row: Row) -> Result<UnitRecord, StoreError> {
    let params = sqlx::query_as::<_, ParamRow>(
        "SELECT name, description, default_value, pattern FROM unit_params \
         WHERE unit_id = $1 ORDER BY position",
    )
    .bind(&row.id)
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|p| ParamSpec {
        name: p.name,
        description: p.description,
        default_value: p.default_value,
        pattern: p.pattern,
    })
    .collect();
    Ok(UnitRecord {
        id: parse_id(&row.id)?,
        name: row.name,
        description: row.description,
        internal: flag(row.internal),
        enabled: flag(row.enabled),
        exports: exports(row.has_filter, row.has_score, row.has_balance),
        score_order: score_order(&row.score_order)?,
        params,
        module_sha256: row.module_sha256,
        module_size_bytes: u64::try_from(row.size_bytes).unwrap_or(0),
        module_language: row.language,
        uploaded_at: row.uploaded_at,
        uploaded_by: row.uploaded_by,
    })
}

impl Db {
    /// Every unit, by name.
    pub async fn units(&mut self) -> Result<Vec<UnitRecord>, StoreError> {
        let name = self.by_bytes("u.name");
        let conn = self.conn();
        let rows =
            sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} ORDER BY {name}")))
                .fetch_all(&mut *conn)
                .await?;
        let mut units = Vec::with_capacity(rows.len());
        for row in rows {
            units.push(complete(conn, row).await?);
        }
        Ok(units)
    }

    pub async fn unit(&mut self, id: Uuid) -> Result<Option<UnitRecord>, StoreError> {
        let conn = self.conn();
        let row =
            sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} WHERE u.id = $1")))
                .bind(id.to_string())
                .fetch_optional(&mut *conn)
                .await?;
        match row {
            Some(row) => Ok(Some(complete(conn, row).await?)),
            None => Ok(None),
        }
    }

    pub async fn unit_by_name(&mut self, name: &str) -> Result<Option<UnitRecord>, StoreError> {
        let sql = format!("{SELECT} WHERE {}", self.name_equals("u.name", 1));
        let conn = self.conn();
        let row = sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
        match row {
            Some(row) => Ok(Some(complete(conn, row).await?)),
            None => Ok(None),
        }
    }

    /// Adds a unit whose module is already stored.
    pub async fn insert_unit(
        &mut self,
        id: Uuid,
        internal: bool,
        module: &UnitModule,
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query(
            "INSERT INTO policy_units (id, name, description, internal, enabled, has_filter, \
             has_score, has_balance, score_order, module_sha256, uploaded_by) \
             VALUES ($1, $2, $3, $4, 1, $5, $6, $7, $8, $9, $10)",
        )
        .bind(id.to_string())
        .bind(&module.name)
        .bind(&module.description)
        .bind(i64::from(internal))
        .bind(i64::from(module.exports.filter))
        .bind(i64::from(module.exports.score))
        .bind(i64::from(module.exports.balance))
        .bind(module.score_order.wit_name())
        .bind(&module.module_sha256)
        .bind(&module.uploaded_by)
        .execute(&mut *conn)
        .await?;
        write_params(&mut *conn, id, &module.params).await?;
        write_version(conn, id, 1, module, None).await
    }

    /// Points a unit at another module and replaces everything read from
    /// it, as a new version (`rollback_of`: the version it restores, if
    /// any), keeping the unit's `keep` newest versions.
    pub async fn replace_unit_module(
        &mut self,
        id: Uuid,
        module: &UnitModule,
        rollback_of: Option<i64>,
        keep: u32,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let conn = self.conn();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE policy_units SET name = $1, description = $2, has_filter = $3, has_score = $4, \
             has_balance = $5, score_order = $6, module_sha256 = $7, uploaded_by = $8, \
             uploaded_at = {now} WHERE id = $9"
        )))
        .bind(&module.name)
        .bind(&module.description)
        .bind(i64::from(module.exports.filter))
        .bind(i64::from(module.exports.score))
        .bind(i64::from(module.exports.balance))
        .bind(module.score_order.wit_name())
        .bind(&module.module_sha256)
        .bind(&module.uploaded_by)
        .bind(id.to_string())
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM unit_params WHERE unit_id = $1")
            .bind(id.to_string())
            .execute(&mut *conn)
            .await?;
        write_params(&mut *conn, id, &module.params).await?;
        let latest: Option<i64> =
            sqlx::query_scalar("SELECT max(version) FROM unit_versions WHERE unit_id = $1")
                .bind(id.to_string())
                .fetch_one(&mut *conn)
                .await?;
        let version = latest.unwrap_or(0) + 1;
        write_version(&mut *conn, id, version, module, rollback_of).await?;
        sqlx::query("DELETE FROM unit_versions WHERE unit_id = $1 AND version <= $2")
            .bind(id.to_string())
            .bind(version - i64::from(keep.max(1)))
            .execute(conn)
            .await?;
        Ok(())
    }

    /// Whether some unit runs the module `sha256` now.
    pub async fn module_in_use(&mut self, sha256: &str) -> Result<bool, StoreError> {
        let conn = self.conn();
        // EXISTS is an integer in SQLite but a boolean in PostgreSQL, which
        // sqlx's `any` driver does not read as an integer (nor SQLite's as
        // a bool): the CASE makes it 0/1 on both.
        let used: i64 = sqlx::query_scalar(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM policy_units WHERE module_sha256 = $1) \
             THEN 1 ELSE 0 END",
        )
        .bind(sha256)
        .fetch_one(conn)
        .await?;
        Ok(used != 0)
    }

    /// The versions a unit keeps, newest first.
    pub async fn unit_versions(&mut self, id: Uuid) -> Result<Vec<UnitVersion>, StoreError> {
        let conn = self.conn();
        sqlx::query_as::<_, VersionRow>(sqlx::AssertSqlSafe(format!(
            "{SELECT_VERSION} WHERE v.unit_id = $1 ORDER BY v.version DESC"
        )))
        .bind(id.to_string())
        .fetch_all(conn)
        .await?
        .into_iter()
        .map(VersionRow::into_version)
        .collect()
    }

    pub async fn set_unit_enabled(&mut self, id: Uuid, enabled: bool) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query("UPDATE policy_units SET enabled = $1 WHERE id = $2")
            .bind(i64::from(enabled))
            .bind(id.to_string())
            .execute(conn)
            .await?;
        Ok(())
    }

    pub async fn delete_unit(&mut self, id: Uuid) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query("DELETE FROM policy_units WHERE id = $1")
            .bind(id.to_string())
            .execute(conn)
            .await?;
        Ok(())
    }

    /// The names of the policies that use unit `id` in any slot, by name.
    pub async fn policies_using_unit(&mut self, id: Uuid) -> Result<Vec<String>, StoreError> {
        let name = self.by_bytes("p.name");
        let conn = self.conn();
        Ok(sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(format!(
            "SELECT p.name FROM scheduling_policies p WHERE p.id IN ( \
                 SELECT policy_id FROM policy_filters WHERE unit_id = $1 \
                 UNION SELECT policy_id FROM policy_weights WHERE unit_id = $1 \
                 UNION SELECT policy_id FROM policy_balances WHERE unit_id = $1) \
             ORDER BY {name}"
        )))
        .bind(id.to_string())
        .fetch_all(conn)
        .await?)
    }

    /// Every unit's name by id, to name units in responses about policies.
    pub async fn unit_names(
        &mut self,
    ) -> Result<std::collections::HashMap<Uuid, String>, StoreError> {
        let conn = self.conn();
        sqlx::query_as::<_, (String, String)>("SELECT id, name FROM policy_units")
            .fetch_all(conn)
            .await?
            .into_iter()
            .map(|(id, name)| Ok((parse_id(&id)?, name)))
            .collect()
    }

    /// The ids of the disabled units.
    pub async fn disabled_units(&mut self) -> Result<std::collections::HashSet<Uuid>, StoreError> {
        let conn = self.conn();
        sqlx::query_scalar::<_, String>("SELECT id FROM policy_units WHERE enabled = 0")
            .fetch_all(conn)
            .await?
            .into_iter()
            .map(|id| parse_id(&id))
            .collect()
    }
}

row_struct! {
    struct VersionRow {
        version: i64,
        module_sha256: String,
        size_bytes: i64,
        language: Option<String>,
        name: String,
        description: String,
        has_filter: i64,
        has_score: i64,
        has_balance: i64,
        score_order: String,
        params: String,
        uploaded_at: String,
        uploaded_by: String,
        rollback_of: Option<i64>,
    }
}

const SELECT_VERSION: &str = "SELECT v.version, v.module_sha256, m.size_bytes, m.language, v.name, \
     v.description, v.has_filter, v.has_score, v.has_balance, v.score_order, v.params, \
     v.uploaded_at, v.uploaded_by, v.rollback_of \
     FROM unit_versions v JOIN modules m ON m.sha256 = v.module_sha256";

impl VersionRow {
    fn into_version(self) -> Result<UnitVersion, StoreError> {
        let params: Vec<ParamSpec> = serde_json::from_str(&self.params)
            .map_err(|e| StoreError::Corrupt(format!("a unit version's parameters: {e}")))?;
        Ok(UnitVersion {
            version: self.version,
            module: UnitModule {
                name: self.name,
                description: self.description,
                exports: exports(self.has_filter, self.has_score, self.has_balance),
                score_order: score_order(&self.score_order)?,
                params,
                module_sha256: self.module_sha256,
                uploaded_by: self.uploaded_by,
            },
            module_size_bytes: u64::try_from(self.size_bytes).unwrap_or(0),
            module_language: self.language,
            uploaded_at: self.uploaded_at,
            rollback_of: self.rollback_of,
        })
    }
}

async fn write_version(
    conn: &mut sqlx::AnyConnection,
    id: Uuid,
    version: i64,
    module: &UnitModule,
    rollback_of: Option<i64>,
) -> Result<(), StoreError> {
    let params = serde_json::to_string(&module.params)
        .map_err(|e| StoreError::Corrupt(format!("a unit's parameters: {e}")))?;
    sqlx::query(
        "INSERT INTO unit_versions (unit_id, version, module_sha256, name, description, \
         has_filter, has_score, has_balance, score_order, params, uploaded_by, rollback_of) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(id.to_string())
    .bind(version)
    .bind(&module.module_sha256)
    .bind(&module.name)
    .bind(&module.description)
    .bind(i64::from(module.exports.filter))
    .bind(i64::from(module.exports.score))
    .bind(i64::from(module.exports.balance))
    .bind(module.score_order.wit_name())
    .bind(params)
    .bind(&module.uploaded_by)
    .bind(rollback_of)
    .execute(conn)
    .await?;
    Ok(())
}

async fn write_params(
    conn: &mut sqlx::AnyConnection,
    id: Uuid,
    params: &[ParamSpec],
) -> Result<(), StoreError> {
    for (position, p) in params.iter().enumerate() {
        sqlx::query(
            "INSERT INTO unit_params (unit_id, position, name, description, default_value, pattern) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id.to_string())
        .bind(i64::try_from(position).unwrap_or(i64::MAX))
        .bind(&p.name)
        .bind(&p.description)
        .bind(&p.default_value)
        .bind(&p.pattern)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sqlx::Connection;

    use super::*;
    use crate::store::Store;
    use crate::store::test_support::{backends, sqlite_before_migration};

    #[tokio::test]
    async fn a_module_is_in_use_while_a_unit_runs_it() {
        for db in backends().await {
            let store = db.open().await;
            let mut tx = store.write().await.expect("write");
            let sha = "0".repeat(64);
            assert!(!tx.module_in_use(&sha).await.expect("unused"));
            for sql in [
                format!("INSERT INTO modules (sha256, size_bytes) VALUES ('{sha}', 0)"),
                format!(
                    "INSERT INTO policy_units (id, name, description, internal, has_filter, \
                     has_score, has_balance, score_order, module_sha256, uploaded_by) \
                     VALUES ('{}', 'U', '', 0, 1, 0, 0, 'lower-is-better', '{sha}', 'test')",
                    Uuid::new_v4()
                ),
            ] {
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(tx.conn())
                    .await
                    .expect("rows");
            }
            assert!(tx.module_in_use(&sha).await.expect("used"));
        }
    }

    /// A database made by the Sandpiper before unit versions (migrations up
    /// to 0010) with an uploaded unit: opening it migrates, and the unit's
    /// current module becomes its version 1, parameters in order.
    ///
    /// SQLite only: the PostgreSQL schema starts at the end state of the
    /// SQLite migrations (`migrations/postgres/0001_store.sql`), so no
    /// PostgreSQL database predates unit versions.
    #[tokio::test]
    async fn units_stored_before_versions_become_their_version_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.db");
        let mut conn = sqlite_before_migration(&path, 11, true).await;
        let sha = "a".repeat(64);
        let id = Uuid::new_v4();
        for sql in [
            format!("INSERT INTO modules (sha256, size_bytes) VALUES ('{sha}', 7)"),
            format!(
                "INSERT INTO policy_units (id, name, description, internal, has_filter, has_score, \
                 has_balance, score_order, module_sha256, uploaded_by) \
                 VALUES ('{id}', 'Old', 'd', 0, 1, 0, 0, 'higher-is-better', '{sha}', 'ops')"
            ),
            format!(
                "INSERT INTO unit_params VALUES ('{id}', 1, 'Second', 's', '2', '[0-9]+'), \
                 ('{id}', 0, 'First', 'f', 'x', '.*')"
            ),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .expect("old rows");
        }
        conn.close().await.expect("close");

        let store = Store::open(&path).await.expect("migrates");
        let mut conn = store.read().await.expect("read");
        let versions = conn.unit_versions(id).await.expect("versions");
        assert_eq!(versions.len(), 1);
        let v = &versions[0];
        assert_eq!(
            (v.version, v.rollback_of, v.module_size_bytes),
            (1, None, 7)
        );
        assert_eq!(v.module.module_sha256, sha);
        assert_eq!(v.module.uploaded_by, "ops");
        assert_eq!(v.module.score_order, ScoreOrder::HigherIsBetter);
        assert!(v.module.exports.filter && !v.module.exports.score);
        let names: Vec<&str> = v.module.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["First", "Second"]);
        assert_eq!(v.module.params[1].pattern, "[0-9]+");
    }
}
