//! Scheduling policies: their rows, the units in each slot (filters with a
//! position, weights with a factor, one balance) and their parameter values.

use uuid::Uuid;

use super::rows::row_struct;
use super::{Db, StoreError, flag, parse_id};
use crate::pipeline::{Combination, OnFailure, ParamValues, Position};

/// A stored policy with everything it links to.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyRecord {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// Built in: read-only.
    pub locked: bool,
    /// The policy new clusters get when they name none.
    pub is_default: bool,
    pub combination: Combination,
    pub params: ParamValues,
    /// In the order they were added (the pipeline sorts by position).
    pub filters: Vec<FilterLink>,
    /// In the order they were added.
    pub weights: Vec<WeightLink>,
    pub balance: Option<Uuid>,
    pub created_at: String,
    pub updated_at: String,
}

/// A filter slot of a policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterLink {
    pub unit_id: Uuid,
    pub position: Position,
    pub on_failure: OnFailure,
    /// Runs for the first instance of a multi-instance request only (Nova's
    /// `run_filter_once_per_request`); `run_once` in policy JSON.
    pub run_once: bool,
}

/// A weight (score) slot of a policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeightLink {
    pub unit_id: Uuid,
    pub factor: u32,
    /// What the weight's failure does to a decision
    /// (`pipeline::DEFAULT_WEIGHT_ON_FAILURE` unless chosen).
    pub on_failure: OnFailure,
}

/// The columns of a policy's own row.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyRow {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub locked: bool,
    pub combination: Combination,
}

/// oVirt's integer for a filter position: -1 first, 0 anywhere, 1 last.
pub fn position_number(position: Position) -> i64 {
    match position {
        Position::First => -1,
        Position::Middle => 0,
        Position::Last => 1,
    }
}

/// The position oVirt's integer stands for.
pub fn position_from_number(number: i64) -> Option<Position> {
    match number {
        -1 => Some(Position::First),
        0 => Some(Position::Middle),
        1 => Some(Position::Last),
        _ => None,
    }
}

pub fn combination_name(combination: Combination) -> &'static str {
    match combination {
        Combination::Rank => "rank",
        Combination::Normalised => "normalised",
    }
}

fn combination_from_name(name: &str) -> Result<Combination, StoreError> {
    match name {
        "rank" => Ok(Combination::Rank),
        "normalised" => Ok(Combination::Normalised),
        other => Err(StoreError::Corrupt(format!(
            "unknown combination `{other}`"
        ))),
    }
}

fn on_failure_name(on_failure: OnFailure) -> &'static str {
    match on_failure {
        OnFailure::FailClosed => "fail_closed",
        OnFailure::FailOpen => "fail_open",
    }
}

fn on_failure_from_name(name: &str) -> Result<OnFailure, StoreError> {
    match name {
        "fail_closed" => Ok(OnFailure::FailClosed),
        "fail_open" => Ok(OnFailure::FailOpen),
        other => Err(StoreError::Corrupt(format!("unknown on_failure `{other}`"))),
    }
}

row_struct! {
    struct Row {
        id: String,
        name: String,
        description: String,
        locked: i64,
        is_default: i64,
        combination: String,
        created_at: String,
        updated_at: String,
    }
}

const SELECT: &str = "SELECT id, name, description, locked, is_default, combination, \
     created_at, updated_at FROM scheduling_policies";

async fn complete(conn: &mut sqlx::AnyConnection, row: Row) -> Result<PolicyRecord, StoreError> {
    let filters = sqlx::query_as::<_, (String, i64, String, i64)>(
        "SELECT unit_id, position, on_failure, run_once FROM policy_filters \
         WHERE policy_id = $1 ORDER BY rowid",
    )
    .bind(&row.id)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|(unit_id, position, on_failure, run_once)| {
        Ok(FilterLink {
            unit_id: parse_id(&unit_id)?,
            position: position_from_number(position)
                .ok_or_else(|| StoreError::Corrupt(format!("filter position {position}")))?,
            on_failure: on_failure_from_name(&on_failure)?,
            run_once: flag(run_once),
        })
    })
    .collect::<Result<Vec<_>, StoreError>>()?;
    let weights = sqlx::query_as::<_, (String, i64, String)>(
        "SELECT unit_id, factor, on_failure FROM policy_weights WHERE policy_id = $1 ORDER BY rowid",
    )
    .bind(&row.id)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|(unit_id, factor, on_failure)| {
        Ok(WeightLink {
            unit_id: parse_id(&unit_id)?,
            factor: u32::try_from(factor)
                .map_err(|_| StoreError::Corrupt(format!("factor {factor}")))?,
            on_failure: on_failure_from_name(&on_failure)?,
        })
    })
    .collect::<Result<Vec<_>, StoreError>>()?;
    let balance =
        sqlx::query_scalar::<_, String>("SELECT unit_id FROM policy_balances WHERE policy_id = $1")
            .bind(&row.id)
            .fetch_optional(&mut *conn)
            .await?
            .map(|id| parse_id(&id))
            .transpose()?;
    let params = read_params(conn, &row.id).await?;
    Ok(PolicyRecord {
        id: parse_id(&row.id)?,
        name: row.name,
        description: row.description,
        locked: flag(row.locked),
        is_default: flag(row.is_default),
        combination: combination_from_name(&row.combination)?,
        params,
        filters,
        weights,
        balance,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

async fn read_params(conn: &mut sqlx::AnyConnection, id: &str) -> Result<ParamValues, StoreError> {
    Ok(sqlx::query_as::<_, (String, String)>(
        "SELECT name, value FROM policy_params WHERE policy_id = $1 ORDER BY name",
    )
    .bind(id)
    .fetch_all(conn)
    .await?
    .into_iter()
    .collect())
}

impl Db {
    /// Every policy, by name.
    pub async fn policies(&mut self) -> Result<Vec<PolicyRecord>, StoreError> {
        let name = self.by_bytes("name");
        let conn = self.conn();
        let rows =
            sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} ORDER BY {name}")))
                .fetch_all(&mut *conn)
                .await?;
        let mut policies = Vec::with_capacity(rows.len());
        for row in rows {
            policies.push(complete(conn, row).await?);
        }
        Ok(policies)
    }

    pub async fn policy(&mut self, id: Uuid) -> Result<Option<PolicyRecord>, StoreError> {
        let conn = self.conn();
        let row = sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} WHERE id = $1")))
            .bind(id.to_string())
            .fetch_optional(&mut *conn)
            .await?;
        match row {
            Some(row) => Ok(Some(complete(conn, row).await?)),
            None => Ok(None),
        }
    }

    /// The default policy's id, if there is one.
    pub async fn default_policy_id(&mut self) -> Result<Option<Uuid>, StoreError> {
        let conn = self.conn();
        sqlx::query_scalar::<_, String>("SELECT id FROM scheduling_policies WHERE is_default = 1")
            .fetch_optional(conn)
            .await?
            .map(|id| parse_id(&id))
            .transpose()
    }

    /// The id of the policy called `name`, if any.
    pub async fn policy_id_by_name(&mut self, name: &str) -> Result<Option<Uuid>, StoreError> {
        self.id_by_name("scheduling_policies", name).await
    }

    /// Writes `policy` as a whole: its row (inserted or updated), its
    /// parameters and all three slots, replacing what was stored. The default
    /// flag is left alone (see [`Db::make_default_policy`]).
    pub async fn save_policy(&mut self, policy: &PolicyRecord) -> Result<(), StoreError> {
        let now = self.now();
        let conn = self.conn();
        let id = policy.id.to_string();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO scheduling_policies (id, name, description, locked, combination) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (id) DO UPDATE SET name = $2, description = $3, locked = $4, \
             combination = $5, updated_at = {now}"
        )))
        .bind(&id)
        .bind(&policy.name)
        .bind(&policy.description)
        .bind(i64::from(policy.locked))
        .bind(combination_name(policy.combination))
        .execute(&mut *conn)
        .await?;
        for table in [
            "policy_params",
            "policy_filters",
            "policy_weights",
            "policy_balances",
        ] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE policy_id = $1"
            )))
            .bind(&id)
            .execute(&mut *conn)
            .await?;
        }
        for (name, value) in &policy.params {
            sqlx::query("INSERT INTO policy_params (policy_id, name, value) VALUES ($1, $2, $3)")
                .bind(&id)
                .bind(name)
                .bind(value)
                .execute(&mut *conn)
                .await?;
        }
        for filter in &policy.filters {
            sqlx::query(
                "INSERT INTO policy_filters (policy_id, unit_id, position, on_failure, run_once) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&id)
            .bind(filter.unit_id.to_string())
            .bind(position_number(filter.position))
            .bind(on_failure_name(filter.on_failure))
            .bind(i64::from(filter.run_once))
            .execute(&mut *conn)
            .await?;
        }
        for weight in &policy.weights {
            sqlx::query(
                "INSERT INTO policy_weights (policy_id, unit_id, factor, on_failure) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(&id)
            .bind(weight.unit_id.to_string())
            .bind(i64::from(weight.factor))
            .bind(on_failure_name(weight.on_failure))
            .execute(&mut *conn)
            .await?;
        }
        if let Some(unit_id) = policy.balance {
            sqlx::query("INSERT INTO policy_balances (policy_id, unit_id) VALUES ($1, $2)")
                .bind(&id)
                .bind(unit_id.to_string())
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// Makes policy `id` the default and every other policy not.
    pub async fn make_default_policy(&mut self, id: Uuid) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query(
            "UPDATE scheduling_policies SET is_default = 0 WHERE is_default = 1 AND id <> $1",
        )
        .bind(id.to_string())
        .execute(&mut *conn)
        .await?;
        sqlx::query("UPDATE scheduling_policies SET is_default = 1 WHERE id = $1")
            .bind(id.to_string())
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    pub async fn delete_policy(&mut self, id: Uuid) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query("DELETE FROM scheduling_policies WHERE id = $1")
            .bind(id.to_string())
            .execute(conn)
            .await?;
        Ok(())
    }

    /// The names of the clusters that run policy `id`, by name.
    pub async fn clusters_using_policy(&mut self, id: Uuid) -> Result<Vec<String>, StoreError> {
        let name = self.by_bytes("name");
        let conn = self.conn();
        Ok(sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(format!(
            "SELECT name FROM clusters WHERE policy_id = $1 ORDER BY {name}"
        )))
        .bind(id.to_string())
        .fetch_all(conn)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::backends;

    #[tokio::test]
    async fn a_filter_keeps_its_run_once_flag() {
        for db in backends().await {
            let store = db.open().await;
            let mut tx = store.write().await.expect("write");
            let sha = "0".repeat(64);
            sqlx::query("INSERT INTO modules (sha256, size_bytes) VALUES ($1, 0)")
                .bind(&sha)
                .execute(tx.conn())
                .await
                .expect("module");
            let units: Vec<Uuid> = (0..2).map(|_| Uuid::new_v4()).collect();
            for (i, id) in units.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO policy_units (id, name, description, internal, has_filter, \
                     has_score, has_balance, score_order, module_sha256, uploaded_by) \
                     VALUES ($1, $2, '', 0, 1, 0, 0, 'lower-is-better', $3, 'test')",
                )
                .bind(id.to_string())
                .bind(format!("u{i}"))
                .bind(&sha)
                .execute(tx.conn())
                .await
                .expect("unit");
            }
            let policy = PolicyRecord {
                id: Uuid::new_v4(),
                name: "p".to_owned(),
                description: String::new(),
                locked: false,
                is_default: false,
                combination: Combination::Normalised,
                params: ParamValues::new(),
                filters: vec![
                    FilterLink {
                        unit_id: units[0],
                        position: Position::Middle,
                        on_failure: OnFailure::FailClosed,
                        run_once: true,
                    },
                    FilterLink {
                        unit_id: units[1],
                        position: Position::Middle,
                        on_failure: OnFailure::FailClosed,
                        run_once: false,
                    },
                ],
                weights: Vec::new(),
                balance: None,
                created_at: String::new(),
                updated_at: String::new(),
            };
            tx.save_policy(&policy).await.expect("saved");
            let read = tx.policy(policy.id).await.expect("read").expect("found");
            let flags: Vec<bool> = read.filters.iter().map(|f| f.run_once).collect();
            assert_eq!(flags, [true, false]);
        }
    }
}
