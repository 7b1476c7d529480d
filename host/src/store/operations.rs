//! The operations queue's rows (migration `0007_operations.sql`): one per
//! operation, from submit to its outcome. `crate::operations` keeps the
//! unfinished ones in memory and writes every change here, in a
//! [`super::Store::write`] transaction committed before it answers.
//!
//! Kinds, lock declarations, payloads and outcomes are stored as the text
//! the service gives (names and JSON); this module parses none of them.

use uuid::Uuid;

use super::rows::row_struct;
use super::{Db, StoreError, parse_id, unsigned};

/// A stored operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRow {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub seq: u64,
    pub kind: String,
    pub priority: i32,
    /// The lock declaration, as JSON.
    pub locks: String,
    /// The payload, as JSON.
    pub payload: String,
    /// `engine`, `balance` or `pool`.
    pub origin: String,
    /// Set exactly when `origin` is `pool`.
    pub pool_id: Option<Uuid>,
    pub vm_id: Option<String>,
    /// `queued`, `leased`, `succeeded`, `failed` or `cancelled`.
    pub state: String,
    pub attempts: u32,
    pub submitted_at_ms: u64,
    pub lease: Option<LeaseRow>,
    pub finished_at_ms: Option<u64>,
    /// `{"outcome": ..., "detail": ...}` as JSON, once finished.
    pub outcome: Option<String>,
}

/// The lease of a leased operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    pub id: Uuid,
    pub holder: String,
    /// Milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
}

const COLUMNS: &str = "id, cluster_id, seq, kind, priority, locks, payload, origin, pool_id, \
     vm_id, state, attempts, submitted_at_ms, lease_id, lease_holder, lease_expires_at_ms, \
     finished_at_ms, outcome";

row_struct! {
    struct Row {
        id: String,
        cluster_id: String,
        seq: i64,
        kind: String,
        priority: i64,
        locks: String,
        payload: String,
        origin: String,
        pool_id: Option<String>,
        vm_id: Option<String>,
        state: String,
        attempts: i64,
        submitted_at_ms: i64,
        lease_id: Option<String>,
        lease_holder: Option<String>,
        lease_expires_at_ms: Option<i64>,
        finished_at_ms: Option<i64>,
        outcome: Option<String>,
    }
}

impl TryFrom<Row> for OperationRow {
    type Error = StoreError;

    fn try_from(row: Row) -> Result<Self, StoreError> {
        let lease = match (row.lease_id, row.lease_holder, row.lease_expires_at_ms) {
            (Some(id), Some(holder), Some(expires)) => Some(LeaseRow {
                id: parse_id(&id)?,
                holder,
                expires_at_ms: unsigned(expires),
            }),
            (None, _, _) => None,
            _ => {
                return Err(StoreError::Corrupt(format!(
                    "operation {} has a partial lease",
                    row.id
                )));
            }
        };
        Ok(OperationRow {
            id: parse_id(&row.id)?,
            cluster_id: parse_id(&row.cluster_id)?,
            seq: unsigned(row.seq),
            kind: row.kind,
            priority: i32::try_from(row.priority)
                .map_err(|_| StoreError::Corrupt(format!("priority {}", row.priority)))?,
            locks: row.locks,
            payload: row.payload,
            origin: row.origin,
            pool_id: row.pool_id.as_deref().map(parse_id).transpose()?,
            vm_id: row.vm_id,
            state: row.state,
            attempts: u32::try_from(row.attempts).unwrap_or(u32::MAX),
            submitted_at_ms: unsigned(row.submitted_at_ms),
            lease,
            finished_at_ms: row.finished_at_ms.map(unsigned),
            outcome: row.outcome,
        })
    }
}

fn millis(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Db {
    /// Stores a new operation.
    pub async fn insert_operation(&mut self, op: &OperationRow) -> Result<(), StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO operations ({COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
        )))
        .bind(op.id.to_string())
        .bind(op.cluster_id.to_string())
        .bind(millis(op.seq))
        .bind(&op.kind)
        .bind(i64::from(op.priority))
        .bind(&op.locks)
        .bind(&op.payload)
        .bind(&op.origin)
        .bind(op.pool_id.map(|id| id.to_string()))
        .bind(&op.vm_id)
        .bind(&op.state)
        .bind(i64::from(op.attempts))
        .bind(millis(op.submitted_at_ms))
        .bind(op.lease.as_ref().map(|l| l.id.to_string()))
        .bind(op.lease.as_ref().map(|l| l.holder.clone()))
        .bind(op.lease.as_ref().map(|l| millis(l.expires_at_ms)))
        .bind(op.finished_at_ms.map(millis))
        .bind(&op.outcome)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Writes an operation's changing part: its state, attempts, lease and
    /// outcome. `false` when no such operation is stored (its cluster was
    /// deleted meanwhile).
    pub async fn update_operation(&mut self, op: &OperationRow) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE operations SET state = $1, attempts = $2, lease_id = $3, lease_holder = $4, \
             lease_expires_at_ms = $5, finished_at_ms = $6, outcome = $7 \
             WHERE id = $8 AND cluster_id = $9",
        )
        .bind(&op.state)
        .bind(i64::from(op.attempts))
        .bind(op.lease.as_ref().map(|l| l.id.to_string()))
        .bind(op.lease.as_ref().map(|l| l.holder.clone()))
        .bind(op.lease.as_ref().map(|l| millis(l.expires_at_ms)))
        .bind(op.finished_at_ms.map(millis))
        .bind(&op.outcome)
        .bind(op.id.to_string())
        .bind(op.cluster_id.to_string())
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Every unfinished (queued or leased) operation of every cluster, in
    /// submit order: what the queue holds in memory after a start.
    pub async fn unfinished_operations(&mut self) -> Result<Vec<OperationRow>, StoreError> {
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM operations WHERE state IN ('queued', 'leased') ORDER BY seq"
        )))
        .fetch_all(self.conn())
        .await?;
        rows.into_iter().map(OperationRow::try_from).collect()
    }

    /// One cluster's unfinished operations, in submit order: what a
    /// replica that takes the cluster over queues (docs/fleet.md).
    pub async fn unfinished_operations_of(
        &mut self,
        cluster_id: Uuid,
    ) -> Result<Vec<OperationRow>, StoreError> {
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM operations \
             WHERE cluster_id = $1 AND state IN ('queued', 'leased') ORDER BY seq"
        )))
        .bind(cluster_id.to_string())
        .fetch_all(self.conn())
        .await?;
        rows.into_iter().map(OperationRow::try_from).collect()
    }

    /// The highest submit sequence number stored for one cluster.
    pub async fn last_operation_seq_of(
        &mut self,
        cluster_id: Uuid,
    ) -> Result<Option<u64>, StoreError> {
        let last: Option<i64> =
            sqlx::query_scalar("SELECT MAX(seq) FROM operations WHERE cluster_id = $1")
                .bind(cluster_id.to_string())
                .fetch_one(self.conn())
                .await?;
        Ok(last.map(unsigned))
    }

    /// The highest submit sequence number stored (`None`: no operation
    /// was ever stored, or all were deleted with their clusters).
    pub async fn last_operation_seq(&mut self) -> Result<Option<u64>, StoreError> {
        let last: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM operations")
            .fetch_one(self.conn())
            .await?;
        Ok(last.map(unsigned))
    }

    /// One operation of a cluster.
    pub async fn operation(
        &mut self,
        cluster_id: Uuid,
        id: Uuid,
    ) -> Result<Option<OperationRow>, StoreError> {
        let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM operations WHERE id = $1 AND cluster_id = $2"
        )))
        .bind(id.to_string())
        .bind(cluster_id.to_string())
        .fetch_optional(self.conn())
        .await?;
        row.map(OperationRow::try_from).transpose()
    }

    /// Deletes up to `limit` operations that finished before `before_ms`
    /// (milliseconds since the Unix epoch), oldest first; returns how many.
    pub async fn delete_finished_operations(
        &mut self,
        before_ms: u64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "DELETE FROM operations WHERE id IN (SELECT id FROM operations              WHERE state IN ('succeeded', 'failed', 'cancelled') AND finished_at_ms < $1              ORDER BY finished_at_ms LIMIT $2)",
        )
        .bind(millis(before_ms))
        .bind(i64::from(limit))
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected())
    }

    /// A cluster's operations in submit order, of one state or all, at
    /// most `limit`, starting after sequence number `after` (paging).
    pub async fn operations(
        &mut self,
        cluster_id: Uuid,
        state: Option<&str>,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<OperationRow>, StoreError> {
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM operations WHERE cluster_id = $1 \
             AND ($2 IS NULL OR state = $3) AND seq > $4 ORDER BY seq LIMIT $5"
        )))
        .bind(cluster_id.to_string())
        .bind(state)
        .bind(state)
        .bind(after.map_or(-1, millis))
        .bind(i64::from(limit))
        .fetch_all(self.conn())
        .await?;
        rows.into_iter().map(OperationRow::try_from).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{backends, store_with_cluster};

    fn row(cluster_id: Uuid, seq: u64, state: &str) -> OperationRow {
        OperationRow {
            id: Uuid::new_v4(),
            cluster_id,
            seq,
            kind: "k".to_owned(),
            priority: 0,
            locks: "{}".to_owned(),
            payload: "null".to_owned(),
            origin: "engine".to_owned(),
            pool_id: None,
            vm_id: None,
            state: state.to_owned(),
            attempts: 0,
            submitted_at_ms: 1_000 + seq,
            lease: None,
            finished_at_ms: None,
            outcome: None,
        }
    }

    #[tokio::test]
    async fn rows_round_trip_and_old_finished_ones_go() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let queued = row(cluster, 0, "queued");
            let mut leased = row(cluster, 1, "queued");
            let mut old = row(cluster, 2, "queued");
            let mut tx = store.write().await.expect("tx");
            for r in [&queued, &leased, &old] {
                tx.insert_operation(r).await.expect("insert");
            }
            leased.state = "leased".to_owned();
            leased.attempts = 1;
            leased.lease = Some(LeaseRow {
                id: Uuid::new_v4(),
                holder: "w".to_owned(),
                expires_at_ms: 9_000,
            });
            assert!(tx.update_operation(&leased).await.expect("update"));
            old.state = "succeeded".to_owned();
            old.finished_at_ms = Some(5_000);
            old.outcome = Some("{\"ok\":true}".to_owned());
            assert!(tx.update_operation(&old).await.expect("update"));
            tx.commit().await.expect("commit");

            let mut conn = store.read().await.expect("conn");
            assert_eq!(
                conn.unfinished_operations().await.expect("unfinished"),
                vec![queued.clone(), leased.clone()]
            );
            assert_eq!(conn.last_operation_seq().await.expect("seq"), Some(2));
            assert_eq!(
                conn.operation(cluster, old.id).await.expect("get"),
                Some(old.clone())
            );
            assert_eq!(
                conn.operation(Uuid::new_v4(), old.id).await.expect("get"),
                None,
                "another cluster's"
            );
            let page = conn
                .operations(cluster, None, Some(0), 1)
                .await
                .expect("list");
            assert_eq!(page, vec![leased.clone()]);
            let done = conn
                .operations(cluster, Some("succeeded"), None, 10)
                .await
                .expect("list");
            assert_eq!(done, vec![old.clone()]);
            drop(conn);

            let mut tx = store.write().await.expect("tx");
            assert_eq!(
                tx.delete_finished_operations(5_000, 10)
                    .await
                    .expect("delete"),
                0
            );
            assert_eq!(
                tx.delete_finished_operations(5_001, 10)
                    .await
                    .expect("delete"),
                1
            );
            tx.commit().await.expect("commit");
            let mut conn = store.read().await.expect("conn");
            assert_eq!(conn.operation(cluster, old.id).await.expect("get"), None);
            assert_eq!(
                conn.unfinished_operations()
                    .await
                    .expect("unfinished")
                    .len(),
                2
            );
        }
    }
}
