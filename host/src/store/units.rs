//! Policy units: what each one is called, which roles its module exports,
//! the parameters it declares, and which module it runs.

use sandpiper_model::{ParamSpec, ScoreOrder};
use uuid::Uuid;

use super::{Db, SqliteConnection, StoreError, flag, parse_id};
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
    pub uploaded_at: String,
    /// Name of the token that uploaded it, or `builtin`.
    pub uploaded_by: String,
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

#[derive(sqlx::FromRow)]
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
    uploaded_at: String,
    uploaded_by: String,
}

#[derive(sqlx::FromRow)]
struct ParamRow {
    name: String,
    description: String,
    default_value: String,
    pattern: String,
}

const SELECT: &str = "SELECT u.id, u.name, u.description, u.internal, u.enabled, \
     u.has_filter, u.has_score, u.has_balance, u.score_order, u.module_sha256, \
     m.size_bytes, u.uploaded_at, u.uploaded_by \
     FROM policy_units u JOIN modules m ON m.sha256 = u.module_sha256";

async fn complete(conn: &mut SqliteConnection, row: Row) -> Result<UnitRecord, StoreError> {
    let params = sqlx::query_as::<_, ParamRow>(
        "SELECT name, description, default_value, pattern FROM unit_params \
         WHERE unit_id = ? ORDER BY position",
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
        exports: Exports {
            filter: flag(row.has_filter),
            score: flag(row.has_score),
            balance: flag(row.has_balance),
        },
        score_order: ScoreOrder::from_wit_name(&row.score_order).ok_or_else(|| {
            StoreError::Corrupt(format!("unknown score order `{}`", row.score_order))
        })?,
        params,
        module_sha256: row.module_sha256,
        module_size_bytes: u64::try_from(row.size_bytes).unwrap_or(0),
        uploaded_at: row.uploaded_at,
        uploaded_by: row.uploaded_by,
    })
}

impl Db {
    /// Every unit, by name.
    pub async fn units(&mut self) -> Result<Vec<UnitRecord>, StoreError> {
        let conn = self.sqlite();
        let rows =
            sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} ORDER BY u.name")))
                .fetch_all(&mut *conn)
                .await?;
        let mut units = Vec::with_capacity(rows.len());
        for row in rows {
            units.push(complete(conn, row).await?);
        }
        Ok(units)
    }

    pub async fn unit(&mut self, id: Uuid) -> Result<Option<UnitRecord>, StoreError> {
        let conn = self.sqlite();
        let row = sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} WHERE u.id = ?")))
            .bind(id.to_string())
            .fetch_optional(&mut *conn)
            .await?;
        match row {
            Some(row) => Ok(Some(complete(conn, row).await?)),
            None => Ok(None),
        }
    }

    pub async fn unit_by_name(&mut self, name: &str) -> Result<Option<UnitRecord>, StoreError> {
        let conn = self.sqlite();
        let row = sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!(
            "{SELECT} WHERE u.name = ? COLLATE NOCASE"
        )))
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
        let conn = self.sqlite();
        sqlx::query(
            "INSERT INTO policy_units (id, name, description, internal, enabled, has_filter, \
             has_score, has_balance, score_order, module_sha256, uploaded_by) \
             VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id.to_string())
        .bind(&module.name)
        .bind(&module.description)
        .bind(internal)
        .bind(module.exports.filter)
        .bind(module.exports.score)
        .bind(module.exports.balance)
        .bind(module.score_order.wit_name())
        .bind(&module.module_sha256)
        .bind(&module.uploaded_by)
        .execute(&mut *conn)
        .await?;
        write_params(conn, id, &module.params).await
    }

    /// Points a unit at another module and replaces everything read from it.
    pub async fn replace_unit_module(
        &mut self,
        id: Uuid,
        module: &UnitModule,
    ) -> Result<(), StoreError> {
        let conn = self.sqlite();
        sqlx::query(
            "UPDATE policy_units SET name = ?, description = ?, has_filter = ?, has_score = ?, \
             has_balance = ?, score_order = ?, module_sha256 = ?, uploaded_by = ?, \
             uploaded_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?",
        )
        .bind(&module.name)
        .bind(&module.description)
        .bind(module.exports.filter)
        .bind(module.exports.score)
        .bind(module.exports.balance)
        .bind(module.score_order.wit_name())
        .bind(&module.module_sha256)
        .bind(&module.uploaded_by)
        .bind(id.to_string())
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM unit_params WHERE unit_id = ?")
            .bind(id.to_string())
            .execute(&mut *conn)
            .await?;
        write_params(conn, id, &module.params).await
    }

    pub async fn set_unit_enabled(&mut self, id: Uuid, enabled: bool) -> Result<(), StoreError> {
        let conn = self.sqlite();
        sqlx::query("UPDATE policy_units SET enabled = ? WHERE id = ?")
            .bind(enabled)
            .bind(id.to_string())
            .execute(conn)
            .await?;
        Ok(())
    }

    pub async fn delete_unit(&mut self, id: Uuid) -> Result<(), StoreError> {
        let conn = self.sqlite();
        sqlx::query("DELETE FROM policy_units WHERE id = ?")
            .bind(id.to_string())
            .execute(conn)
            .await?;
        Ok(())
    }

    /// The names of the policies that use unit `id` in any slot, by name.
    pub async fn policies_using_unit(&mut self, id: Uuid) -> Result<Vec<String>, StoreError> {
        let conn = self.sqlite();
        Ok(sqlx::query_scalar::<_, String>(
            "SELECT p.name FROM scheduling_policies p WHERE p.id IN ( \
                 SELECT policy_id FROM policy_filters WHERE unit_id = ?1 \
                 UNION SELECT policy_id FROM policy_weights WHERE unit_id = ?1 \
                 UNION SELECT policy_id FROM policy_balances WHERE unit_id = ?1) \
             ORDER BY p.name",
        )
        .bind(id.to_string())
        .fetch_all(conn)
        .await?)
    }

    /// Every unit's name by id, to name units in responses about policies.
    pub async fn unit_names(
        &mut self,
    ) -> Result<std::collections::HashMap<Uuid, String>, StoreError> {
        let conn = self.sqlite();
        sqlx::query_as::<_, (String, String)>("SELECT id, name FROM policy_units")
            .fetch_all(conn)
            .await?
            .into_iter()
            .map(|(id, name)| Ok((parse_id(&id)?, name)))
            .collect()
    }

    /// The ids of the disabled units.
    pub async fn disabled_units(&mut self) -> Result<std::collections::HashSet<Uuid>, StoreError> {
        let conn = self.sqlite();
        sqlx::query_scalar::<_, String>("SELECT id FROM policy_units WHERE enabled = 0")
            .fetch_all(conn)
            .await?
            .into_iter()
            .map(|id| parse_id(&id))
            .collect()
    }
}

async fn write_params(
    conn: &mut SqliteConnection,
    id: Uuid,
    params: &[ParamSpec],
) -> Result<(), StoreError> {
    for (position, p) in params.iter().enumerate() {
        sqlx::query(
            "INSERT INTO unit_params (unit_id, position, name, description, default_value, pattern) \
             VALUES (?, ?, ?, ?, ?, ?)",
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
