//! The decisions log: what was decided for a cluster and why (the explain
//! record), kept for a bounded number of decisions per cluster.

use uuid::Uuid;

use super::{SqliteConnection, StoreError, parse_id};

/// Which question a decision answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionKind {
    Schedule,
    Balance,
}

impl DecisionKind {
    pub fn name(self) -> &'static str {
        match self {
            DecisionKind::Schedule => "schedule",
            DecisionKind::Balance => "balance",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "schedule" => Some(DecisionKind::Schedule),
            "balance" => Some(DecisionKind::Balance),
            _ => None,
        }
    }
}

/// A stored decision.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionRecord {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub kind: DecisionKind,
    /// The VM placed, or the VM the balance unit proposed to move.
    pub vm_id: Option<String>,
    /// The host chosen, if any.
    pub host_id: Option<String>,
    /// The full answer as returned to the engine (JSON text), explain
    /// record included.
    pub answer: String,
    pub created_at: String,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    cluster_id: String,
    kind: String,
    vm_id: Option<String>,
    host_id: Option<String>,
    answer: String,
    created_at: String,
}

impl Row {
    fn into_record(self) -> Result<DecisionRecord, StoreError> {
        Ok(DecisionRecord {
            id: parse_id(&self.id)?,
            cluster_id: parse_id(&self.cluster_id)?,
            kind: DecisionKind::from_name(&self.kind)
                .ok_or_else(|| StoreError::Corrupt(format!("decision kind `{}`", self.kind)))?,
            vm_id: self.vm_id,
            host_id: self.host_id,
            answer: self.answer,
            created_at: self.created_at,
        })
    }
}

const SELECT: &str =
    "SELECT id, cluster_id, kind, vm_id, host_id, answer, created_at FROM decisions";

/// Records a decision and forgets the cluster's oldest ones beyond `retain`.
pub async fn insert(
    conn: &mut SqliteConnection,
    decision: &DecisionRecord,
    retain: u32,
) -> Result<(), StoreError> {
    let cluster_id = decision.cluster_id.to_string();
    sqlx::query(
        "INSERT INTO decisions (id, cluster_id, kind, vm_id, host_id, answer) \
         VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(decision.id.to_string())
    .bind(&cluster_id)
    .bind(decision.kind.name())
    .bind(&decision.vm_id)
    .bind(&decision.host_id)
    .bind(&decision.answer)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "DELETE FROM decisions WHERE cluster_id = ?1 AND rowid NOT IN ( \
             SELECT rowid FROM decisions WHERE cluster_id = ?1 ORDER BY rowid DESC LIMIT ?2)",
    )
    .bind(&cluster_id)
    .bind(i64::from(retain))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The cluster's most recent decisions, newest first.
pub async fn list(
    conn: &mut SqliteConnection,
    cluster_id: Uuid,
    limit: u32,
) -> Result<Vec<DecisionRecord>, StoreError> {
    sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE cluster_id = ? ORDER BY rowid DESC LIMIT ?"
    )))
    .bind(cluster_id.to_string())
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(Row::into_record)
    .collect()
}

pub async fn get(
    conn: &mut SqliteConnection,
    id: Uuid,
) -> Result<Option<DecisionRecord>, StoreError> {
    sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} WHERE id = ?")))
        .bind(id.to_string())
        .fetch_optional(conn)
        .await?
        .map(Row::into_record)
        .transpose()
}
