//! The decisions log: what was decided for a cluster and why (the explain
//! record), with the claims each decision made, kept for a bounded number
//! of decisions per cluster and a bounded time ([`Retention`]).
//!
//! Every decision reaches the log the same way: queued to the store's one
//! writer ([`super::writer`]), which inserts it with [`Db::insert_decisions`]
//! and applies the one retention rule, [`Db::trim_decisions`].

use std::time::Duration;

use uuid::Uuid;

use super::{Db, ROWS_PER_STATEMENT, StoreError, parse_id, placeholders};
use crate::time::Timestamp;

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

/// A decision for the log, with the claims it made.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedDecision {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub kind: DecisionKind,
    pub vm_id: Option<String>,
    pub host_id: Option<String>,
    /// The answer as returned, with a bounded explain record.
    pub answer: String,
    /// (VM, host) of every claim the decision made; none for a decision
    /// over inline hosts.
    pub claims: Vec<(String, String)>,
}

/// How long decisions are kept: the one retention rule of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Decisions kept per cluster, newest first.
    pub count: u32,
    /// Decisions older than this are forgotten.
    pub max_age: Duration,
}

/// Which decisions [`Db::decision_page`] lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecisionQuery {
    /// Only this cluster's decisions.
    pub cluster_id: Option<Uuid>,
    /// Only decisions that placed, moved or claimed for this VM.
    pub vm_id: Option<String>,
    /// Only decisions made at or after this time.
    pub since: Option<Timestamp>,
    /// Only decisions made before this time.
    pub until: Option<Timestamp>,
    /// At most this many, newest first.
    pub limit: u32,
}

/// A logged decision with the claims it made, as [`Db::decision_page`]
/// lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionWithClaims {
    pub record: DecisionRecord,
    /// (VM, host) of every claim the decision made, in the order made.
    pub claims: Vec<(String, String)>,
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

impl Db {
    /// The cluster's most recent decisions, newest first.
    pub async fn cluster_decisions(
        &mut self,
        cluster_id: Uuid,
        limit: u32,
    ) -> Result<Vec<DecisionRecord>, StoreError> {
        let conn = self.sqlite();
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

    pub async fn decision(&mut self, id: Uuid) -> Result<Option<DecisionRecord>, StoreError> {
        let conn = self.sqlite();
        sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} WHERE id = ?")))
            .bind(id.to_string())
            .fetch_optional(conn)
            .await?
            .map(Row::into_record)
            .transpose()
    }

    /// Records `decisions` and the claims each made: the only statement
    /// that adds to the log.
    pub async fn insert_decisions(
        &mut self,
        decisions: &[LoggedDecision],
    ) -> Result<(), StoreError> {
        let conn = self.sqlite();
        for chunk in decisions.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO decisions (id, cluster_id, kind, vm_id, host_id, answer) VALUES {}",
                placeholders(chunk.len(), 6)
            )));
            for decision in chunk {
                query = query
                    .bind(decision.id.to_string())
                    .bind(decision.cluster_id.to_string())
                    .bind(decision.kind.name())
                    .bind(&decision.vm_id)
                    .bind(&decision.host_id)
                    .bind(&decision.answer);
            }
            query.execute(&mut *conn).await?;
        }
        let claims: Vec<(Uuid, &str, &str)> = decisions
            .iter()
            .flat_map(|d| {
                d.claims
                    .iter()
                    .map(move |(vm, host)| (d.id, vm.as_str(), host.as_str()))
            })
            .collect();
        for chunk in claims.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO decision_claims (decision_id, vm_id, host_id) VALUES {}",
                placeholders(chunk.len(), 3)
            )));
            for (id, vm, host) in chunk {
                query = query.bind(id.to_string()).bind(*vm).bind(*host);
            }
            query.execute(&mut *conn).await?;
        }
        Ok(())
    }

    /// Forgets a cluster's decisions beyond the newest `retention.count` and
    /// those older than `retention.max_age` (their claims go with them):
    /// the log's one retention rule.
    pub async fn trim_decisions(
        &mut self,
        cluster_id: Uuid,
        retention: Retention,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let conn = self.sqlite();
        let cluster = cluster_id.to_string();
        let cutoff = Timestamp(
            now.0
                .saturating_sub(u64::try_from(retention.max_age.as_millis()).unwrap_or(u64::MAX)),
        )
        .to_rfc3339();
        sqlx::query("DELETE FROM decisions WHERE cluster_id = ? AND created_at < ?")
            .bind(&cluster)
            .bind(cutoff)
            .execute(&mut *conn)
            .await?;
        sqlx::query(
            "DELETE FROM decisions WHERE cluster_id = ?1 AND rowid <= ( \
                 SELECT rowid FROM decisions WHERE cluster_id = ?1 \
                 ORDER BY rowid DESC LIMIT 1 OFFSET ?2)",
        )
        .bind(&cluster)
        .bind(i64::from(retention.count))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Decisions across clusters matching `query`, newest first, each with
    /// its claims: one statement for the whole page.
    pub async fn decision_page(
        &mut self,
        query: &DecisionQuery,
    ) -> Result<Vec<DecisionWithClaims>, StoreError> {
        let conn = self.sqlite();
        let rows: Vec<PageRow> = sqlx::query_as(
            "SELECT d.id, d.cluster_id, d.kind, d.vm_id, d.host_id, d.answer, d.created_at, \
                    (SELECT json_group_array(json_array(c.vm_id, c.host_id) ORDER BY c.rowid) \
                     FROM decision_claims c WHERE c.decision_id = d.id) AS claims \
             FROM decisions d \
             WHERE (?1 IS NULL OR d.cluster_id = ?1) \
               AND (?2 IS NULL OR d.vm_id = ?2 \
                    OR d.id IN (SELECT decision_id FROM decision_claims WHERE vm_id = ?2)) \
               AND (?3 IS NULL OR d.created_at >= ?3) \
               AND (?4 IS NULL OR d.created_at < ?4) \
             ORDER BY d.created_at DESC, d.rowid DESC LIMIT ?5",
        )
        .bind(query.cluster_id.map(|id| id.to_string()))
        .bind(&query.vm_id)
        .bind(query.since.map(Timestamp::to_rfc3339))
        .bind(query.until.map(Timestamp::to_rfc3339))
        .bind(i64::from(query.limit))
        .fetch_all(conn)
        .await?;
        rows.into_iter().map(PageRow::into_entry).collect()
    }
}

#[derive(sqlx::FromRow)]
struct PageRow {
    #[sqlx(flatten)]
    row: Row,
    /// A JSON array of `[vm_id, host_id]` pairs.
    claims: String,
}

impl PageRow {
    fn into_entry(self) -> Result<DecisionWithClaims, StoreError> {
        let claims: Vec<(String, String)> = serde_json::from_str(&self.claims)
            .map_err(|e| StoreError::Corrupt(format!("claims of decision {}: {e}", self.row.id)))?;
        Ok(DecisionWithClaims {
            record: self.row.into_record()?,
            claims,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::store_with_cluster;

    fn decision(cluster_id: Uuid, i: usize) -> LoggedDecision {
        LoggedDecision {
            id: Uuid::new_v4(),
            cluster_id,
            kind: DecisionKind::Schedule,
            vm_id: Some(format!("vm{i}")),
            host_id: Some("h".to_owned()),
            answer: "{}".to_owned(),
            claims: vec![
                (format!("vm{i}-1"), "h".to_owned()),
                (format!("vm{i}-0"), "g".to_owned()),
            ],
        }
    }

    async fn count(db: &mut Db, table: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(db.sqlite())
            .await
            .expect("count")
    }

    #[tokio::test]
    async fn decisions_are_logged_with_their_claims_and_trimmed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, cluster) = store_with_cluster(dir.path()).await;
        let roomy = Retention {
            count: 10,
            max_age: Duration::from_secs(3600),
        };
        let acks: Vec<_> = (0..5)
            .map(|i| store.submit((decision(cluster, i), roomy)))
            .collect();
        for ack in acks {
            ack.wait().await.expect("stored");
        }
        let mut conn = store.read().await.expect("read");
        assert_eq!(count(&mut conn, "decision_claims").await, 10);

        let three = Retention { count: 3, ..roomy };
        conn.trim_decisions(cluster, three, Timestamp::now())
            .await
            .expect("trims");
        let page = conn
            .decision_page(&DecisionQuery {
                limit: 10,
                ..DecisionQuery::default()
            })
            .await
            .expect("page");
        let kept: Vec<&str> = page
            .iter()
            .filter_map(|d| d.record.vm_id.as_deref())
            .collect();
        assert_eq!(kept, ["vm4", "vm3", "vm2"], "newest first");
        assert_eq!(
            page[0].claims,
            [
                ("vm4-1".to_owned(), "h".to_owned()),
                ("vm4-0".to_owned(), "g".to_owned())
            ],
            "claims in the order made"
        );
        assert_eq!(
            count(&mut conn, "decision_claims").await,
            6,
            "claims go with their decisions"
        );

        // Age: everything is younger than an hour, nothing older than 0 s
        // survives.
        let none = Retention {
            count: 10,
            max_age: Duration::ZERO,
        };
        conn.trim_decisions(
            cluster,
            none,
            Timestamp::now().after(Duration::from_secs(1)),
        )
        .await
        .expect("trims");
        assert_eq!(count(&mut conn, "decisions").await, 0);
    }

    #[tokio::test]
    async fn a_small_log_never_shows_more_than_its_count() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, cluster) = store_with_cluster(dir.path()).await;
        let two = Retention {
            count: 2,
            max_age: Duration::from_secs(3600),
        };
        for i in 0..4 {
            store
                .log_decision(decision(cluster, i), two)
                .await
                .expect("logged");
        }
        let mut conn = store.read().await.expect("read");
        let kept: Vec<String> = conn
            .cluster_decisions(cluster, 10)
            .await
            .expect("list")
            .into_iter()
            .filter_map(|d| d.vm_id)
            .collect();
        assert_eq!(kept, ["vm3", "vm2"]);
    }

    #[tokio::test]
    async fn the_page_filters_by_a_vm_claimed_for() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, cluster) = store_with_cluster(dir.path()).await;
        let roomy = Retention {
            count: 10,
            max_age: Duration::from_secs(3600),
        };
        for i in 0..3 {
            store
                .log_decision(decision(cluster, i), roomy)
                .await
                .expect("logged");
        }
        let mut conn = store.read().await.expect("read");
        let page = conn
            .decision_page(&DecisionQuery {
                vm_id: Some("vm1-0".to_owned()),
                limit: 10,
                ..DecisionQuery::default()
            })
            .await
            .expect("page");
        assert_eq!(page.len(), 1);
        assert_eq!(page[0].record.vm_id.as_deref(), Some("vm1"));
        let other = conn
            .decision_page(&DecisionQuery {
                cluster_id: Some(Uuid::new_v4()),
                limit: 10,
                ..DecisionQuery::default()
            })
            .await
            .expect("page");
        assert!(other.is_empty());
    }
}
