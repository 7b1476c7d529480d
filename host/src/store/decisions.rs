//! The decisions log: what was decided for a cluster and why (the explain
//! record), with the claims each decision made, kept for a bounded number
//! of decisions per cluster and a bounded time ([`Retention`]), within a
//! byte budget for the whole log.
//!
//! A row is bounded whatever was decided: a large answer (an explain record
//! over thousands of inline hosts is megabytes) is logged as its summary,
//! and the answer as returned is kept apart ([`Db::full_answer`]), so that
//! listing the log never reads it. The byte budget drops those full answers
//! first, oldest first, and then the oldest rows ([`Db::trim_decision_bytes`]).
//!
//! Every decision reaches the log the same way: queued to the store's one
//! writer ([`super::writer`]), which inserts it with [`Db::insert_decisions`]
//! and applies the one retention rule (count, age, bytes:
//! [`super::writer`]'s `retain`).

use std::time::Duration;

use uuid::Uuid;

use super::packed::{Codec, Packed};
use super::rows::row_struct;
use super::{Backend, Db, ROWS_PER_STATEMENT, StoreError, parse_id, placeholders};
use crate::time::Timestamp;

/// The byte budget of the whole decisions log unless configured
/// (`sandpiper serve --decisions-max-mib`). A row holds at most a bounded
/// summary (a few KiB, packed to about a tenth), so the default count of
/// 1,000 decisions per cluster is about a MiB per cluster; the rest of
/// 256 MiB keeps the full answers of the latest large decisions (an inline
/// decision over 10,000 hosts answers about 5 MB, over 100,000 about
/// 47 MB), and bounds the database file, which the log otherwise
/// dominates.
pub const DEFAULT_LOG_MAX_BYTES: u64 = 256 * 1024 * 1024;

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
    /// The answer as returned to the engine (JSON text), explain record
    /// included; its bounded summary when `summarized`.
    pub answer: String,
    /// `answer` is a summary of a larger answer, which
    /// [`Db::full_answer`] returns while the byte budget keeps it.
    pub summarized: bool,
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
    /// The answer for the log's row: as returned when it is small, else its
    /// bounded summary (and `full` holds the answer as returned). Stored
    /// packed ([`Packed`]).
    pub answer: String,
    /// The answer as returned, when `answer` is its summary: stored apart
    /// from the row, and dropped first when the log is over its budget.
    pub full: Option<String>,
    /// (VM, host) of every claim the decision made; none for a decision
    /// over inline hosts.
    pub claims: Vec<(String, String)>,
    /// The request body of a schedule decision over the held inventory, as
    /// sent, kept so the decision can be replayed with another policy;
    /// `None` for the others (inline hosts are not kept).
    pub request: Option<String>,
}

impl LoggedDecision {
    /// Whether the decision's first claim is its own VM on its own host,
    /// which its row already names, so the log stores it as a flag instead
    /// of a `decision_claims` row: nearly every decision's one claim.
    fn has_own_claim(&self) -> bool {
        self.claims.first().is_some_and(|(vm, host)| {
            self.vm_id.as_ref() == Some(vm) && self.host_id.as_ref() == Some(host)
        })
    }

    /// The claims `decision_claims` stores: all but the own claim.
    fn other_claims(&self) -> &[(String, String)] {
        &self.claims[usize::from(self.has_own_claim())..]
    }
}

/// A decision's answer as it was returned: the row's own answer, or the
/// full answer kept apart from a summarized row.
#[derive(Clone, Debug, PartialEq)]
pub struct FullAnswer {
    pub cluster_id: Uuid,
    /// `None` when the row is a summary and its full answer was dropped by
    /// the byte budget.
    pub answer: Option<String>,
}

/// The log's size in bytes (its answers as stored, the bulk of it: a
/// row's packed, a full answer's UTF-8 text), as the byte budget counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogBytes {
    /// The rows' answers (summaries for large decisions).
    pub rows: u64,
    /// The full answers kept apart from summarized rows.
    pub full: u64,
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
    /// Only decisions listed after this one, newest first: the last id of
    /// the previous page (a cursor that, unlike `until`, skips nothing
    /// logged in the same millisecond). None are listed if it left the log.
    pub after: Option<Uuid>,
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

row_struct! {
    struct Row {
        id: String,
        cluster_id: String,
        kind: String,
        vm_id: Option<String>,
        host_id: Option<String>,
        answer: Vec<u8>,
        answer_codec: String,
        summarized: i64,
        created_at: String,
    }
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
            answer: stored_answer(&self.id, &self.answer_codec, self.answer)?,
            summarized: super::flag(self.summarized),
            created_at: self.created_at,
        })
    }
}

row_struct! {
    /// What [`Db::full_answer`] reads: the row's answer when it is whole
    /// (not summarized; only then is it read), else the answer kept apart.
    struct FullRow {
        cluster_id: String,
        row_answer: Option<Vec<u8>>,
        answer_codec: String,
        kept_apart: Option<String>,
    }
}

const SELECT: &str = "SELECT id, cluster_id, kind, vm_id, host_id, answer, answer_codec, \
     summarized, created_at FROM decisions";

/// A row's answer read back: unpacked, or `Corrupt` naming the decision.
fn stored_answer(id: &str, codec: &str, bytes: Vec<u8>) -> Result<String, StoreError> {
    let codec = Codec::from_name(codec)
        .ok_or_else(|| StoreError::Corrupt(format!("answer codec `{codec}` of decision {id}")))?;
    Packed::from_stored(codec, bytes).unpack(&format!("the answer of decision {id}"))
}

impl Db {
    /// The cluster's most recent decisions, newest first.
    pub async fn cluster_decisions(
        &mut self,
        cluster_id: Uuid,
        limit: u32,
    ) -> Result<Vec<DecisionRecord>, StoreError> {
        let conn = self.conn();
        sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!(
            "{SELECT} WHERE cluster_id = $1 ORDER BY rowid DESC LIMIT $2"
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
        let conn = self.conn();
        sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} WHERE id = $1")))
            .bind(id.to_string())
            .fetch_optional(conn)
            .await?
            .map(Row::into_record)
            .transpose()
    }

    /// The request decision `id` was asked, as sent: `None` when no such
    /// decision is logged, `Some(None)` when it kept none (a balance
    /// decision, one over inline hosts, or one logged before requests were
    /// kept).
    pub async fn decision_request(
        &mut self,
        id: Uuid,
    ) -> Result<Option<Option<String>>, StoreError> {
        let conn = self.conn();
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT request FROM decisions WHERE id = $1")
                .bind(id.to_string())
                .fetch_optional(conn)
                .await?;
        Ok(row.map(|(request,)| request))
    }

    /// The answer decision `id` returned: its row's, or the full answer
    /// kept apart from its summary. `None` when no such decision is logged.
    pub async fn full_answer(&mut self, id: Uuid) -> Result<Option<FullAnswer>, StoreError> {
        let conn = self.conn();
        let row: Option<FullRow> = sqlx::query_as(
            "SELECT d.cluster_id, \
                    CASE WHEN d.summarized = 0 THEN d.answer END AS row_answer, \
                    d.answer_codec, a.answer AS kept_apart \
             FROM decisions d LEFT JOIN decision_answers a ON a.decision_id = d.id \
             WHERE d.id = $1",
        )
        .bind(id.to_string())
        .fetch_optional(conn)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let answer = match row.row_answer {
            Some(bytes) => Some(stored_answer(&id.to_string(), &row.answer_codec, bytes)?),
            None => row.kept_apart,
        };
        Ok(Some(FullAnswer {
            cluster_id: parse_id(&row.cluster_id)?,
            answer,
        }))
    }

    /// The log's size as the byte budget counts it.
    pub async fn decision_log_bytes(&mut self) -> Result<LogBytes, StoreError> {
        let conn = self.conn();
        let (rows, full): (i64, i64) =
            sqlx::query_as("SELECT row_bytes, full_bytes FROM decision_log_bytes WHERE id = 0")
                .fetch_one(conn)
                .await?;
        Ok(LogBytes {
            rows: super::unsigned(rows),
            full: super::unsigned(full),
        })
    }

    /// Records `decisions` and the claims each made: the only statement
    /// that adds to the log. A decision's own claim (its first, when that
    /// is its VM on its host) is kept in its row, only the others in
    /// `decision_claims` (migration `0015_own_claims.sql`).
    pub async fn insert_decisions(
        &mut self,
        decisions: &[LoggedDecision],
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        for chunk in decisions.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO decisions \
                 (id, cluster_id, kind, vm_id, host_id, answer, answer_codec, summarized, \
                 answer_bytes, request, own_claim) VALUES {}",
                placeholders(1, chunk.len(), 11)
            )));
            // Packed here, on the writer's task, not on the decision's: the
            // decision holds its cluster's lock while it makes the entry.
            for decision in chunk {
                let answer = Packed::pack(&decision.answer);
                let (codec, bytes) = (answer.codec(), answer.into_bytes());
                let stored = stored_bytes(bytes.len() as u64);
                query = query
                    .bind(decision.id.to_string())
                    .bind(decision.cluster_id.to_string())
                    .bind(decision.kind.name())
                    .bind(&decision.vm_id)
                    .bind(&decision.host_id)
                    .bind(bytes)
                    .bind(codec.name())
                    .bind(i64::from(decision.full.is_some()))
                    .bind(stored)
                    .bind(&decision.request)
                    .bind(i64::from(decision.has_own_claim()));
            }
            query.execute(&mut *conn).await?;
        }
        // One statement each: a full answer is megabytes, so batching them
        // would only build one huge statement.
        for decision in decisions {
            if let Some(full) = &decision.full {
                sqlx::query(
                    "INSERT INTO decision_answers (decision_id, bytes, answer) VALUES ($1, $2, $3)",
                )
                .bind(decision.id.to_string())
                .bind(text_bytes(full))
                .bind(full)
                .execute(&mut *conn)
                .await?;
            }
        }
        let claims: Vec<(Uuid, &str, &str)> = decisions
            .iter()
            .flat_map(|d| {
                d.other_claims()
                    .iter()
                    .map(move |(vm, host)| (d.id, vm.as_str(), host.as_str()))
            })
            .collect();
        for chunk in claims.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO decision_claims (decision_id, vm_id, host_id) VALUES {}",
                placeholders(1, chunk.len(), 3)
            )));
            for (id, vm, host) in chunk {
                query = query.bind(id.to_string()).bind(*vm).bind(*host);
            }
            query.execute(&mut *conn).await?;
        }
        Ok(())
    }

    /// Forgets a cluster's decisions beyond the newest `retention.count` and
    /// those older than `retention.max_age` (their claims and full answers
    /// go with them): the per-cluster part of the log's one retention rule,
    /// which the writer applies with [`Db::trim_decision_bytes`].
    pub async fn trim_decisions(
        &mut self,
        cluster_id: Uuid,
        retention: Retention,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        let cluster = cluster_id.to_string();
        let cutoff = Timestamp(
            now.0
                .saturating_sub(u64::try_from(retention.max_age.as_millis()).unwrap_or(u64::MAX)),
        )
        .to_rfc3339();
        sqlx::query("DELETE FROM decisions WHERE cluster_id = $1 AND created_at < $2")
            .bind(&cluster)
            .bind(cutoff)
            .execute(&mut *conn)
            .await?;
        sqlx::query(
            "DELETE FROM decisions WHERE cluster_id = $1 AND rowid <= ( \
                 SELECT rowid FROM decisions WHERE cluster_id = $1 \
                 ORDER BY rowid DESC LIMIT 1 OFFSET $2)",
        )
        .bind(&cluster)
        .bind(i64::from(retention.count))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Keeps the whole log (every cluster's) within `max_bytes`: drops the
    /// full answers kept apart, oldest first, until the log fits, and then,
    /// if the rows alone are over, the oldest rows (their claims and full
    /// answers go with them). Costs one lookup when the log fits.
    pub async fn trim_decision_bytes(&mut self, max_bytes: u64) -> Result<(), StoreError> {
        let size = self.decision_log_bytes().await?;
        if size.rows.saturating_add(size.full) <= max_bytes {
            return Ok(());
        }
        let conn = self.conn();
        if size.full > 0 {
            // Keep the newest full answers that fit beside the rows.
            let room = max_bytes.saturating_sub(size.rows);
            sqlx::query(
                "DELETE FROM decision_answers WHERE rowid IN ( \
                     SELECT rowid FROM ( \
                         SELECT rowid, sum(bytes) OVER (ORDER BY rowid DESC) AS newer \
                         FROM decision_answers) AS running \
                     WHERE newer > $1)",
            )
            .bind(stored_bytes(room))
            .execute(&mut *conn)
            .await?;
        }
        if size.rows > max_bytes {
            sqlx::query(
                "DELETE FROM decisions WHERE rowid IN ( \
                     SELECT rowid FROM ( \
                         SELECT rowid, sum(answer_bytes) OVER (ORDER BY rowid DESC) AS newer \
                         FROM decisions) AS running \
                     WHERE newer > $1)",
            )
            .bind(stored_bytes(max_bytes))
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    /// Decisions across clusters matching `query`, newest first, each with
    /// its claims: one statement for the whole page.
    pub async fn decision_page(
        &mut self,
        query: &DecisionQuery,
    ) -> Result<Vec<DecisionWithClaims>, StoreError> {
        // Each decision's claims as one JSON array of `[vm, host]` pairs.
        let claims = match self.backend() {
            Backend::Sqlite => "json_group_array(json_array(c.vm_id, c.host_id) ORDER BY c.rowid)",
            Backend::Postgres => {
                "coalesce(json_agg(json_build_array(c.vm_id, c.host_id) ORDER BY c.rowid), \
                 '[]'::json)::text"
            }
        };
        let conn = self.conn();
        let rows: Vec<PageRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT d.id, d.cluster_id, d.kind, d.vm_id, d.host_id, d.answer, d.answer_codec, \
                    d.summarized, d.created_at, d.own_claim, \
                    (SELECT {claims} \
                     FROM decision_claims c WHERE c.decision_id = d.id) AS claims \
             FROM decisions d \
             WHERE ($1 IS NULL OR d.cluster_id = $1) \
               AND ($2 IS NULL OR d.vm_id = $2 \
                    OR d.id IN (SELECT decision_id FROM decision_claims WHERE vm_id = $2)) \
               AND ($3 IS NULL OR d.created_at >= $3) \
               AND ($4 IS NULL OR d.created_at < $4) \
               AND ($6 IS NULL OR EXISTS (SELECT 1 FROM decisions p WHERE p.id = $6 \
                    AND (d.created_at < p.created_at \
                         OR (d.created_at = p.created_at AND d.rowid < p.rowid)))) \
             ORDER BY d.created_at DESC, d.rowid DESC LIMIT $5"
        )))
        .bind(query.cluster_id.map(|id| id.to_string()))
        .bind(&query.vm_id)
        .bind(query.since.map(Timestamp::to_rfc3339))
        .bind(query.until.map(Timestamp::to_rfc3339))
        .bind(i64::from(query.limit))
        .bind(query.after.map(|id| id.to_string()))
        .fetch_all(conn)
        .await?;
        rows.into_iter().map(PageRow::into_entry).collect()
    }
}

/// The size of `text` as stored (UTF-8 bytes).
fn text_bytes(text: &str) -> i64 {
    stored_bytes(text.len() as u64)
}

/// A byte count as SQLite's signed integer (a count above 2^63 cannot be,
/// and reads as the largest).
fn stored_bytes(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// A decision's row with its claims (the page's query selects both).
struct PageRow {
    row: Row,
    /// 1 when the decision's first claim is its own VM on its own host,
    /// kept in the row rather than in `claims`.
    own_claim: i64,
    /// The other claims: a JSON array of `[vm_id, host_id]` pairs.
    claims: String,
}

impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for PageRow {
    fn from_row(row: &'r sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
        use sqlx::Row as _;
        Ok(PageRow {
            row: Row::from_row(row)?,
            own_claim: row.try_get("own_claim")?,
            claims: row.try_get("claims")?,
        })
    }
}

impl PageRow {
    fn into_entry(self) -> Result<DecisionWithClaims, StoreError> {
        let others: Vec<(String, String)> = serde_json::from_str(&self.claims)
            .map_err(|e| StoreError::Corrupt(format!("claims of decision {}: {e}", self.row.id)))?;
        let own = match (
            super::flag(self.own_claim),
            &self.row.vm_id,
            &self.row.host_id,
        ) {
            (false, _, _) => None,
            (true, Some(vm), Some(host)) => Some((vm.clone(), host.clone())),
            (true, _, _) => {
                return Err(StoreError::Corrupt(format!(
                    "decision {} has its own claim but no VM or host",
                    self.row.id
                )));
            }
        };
        let claims = own.into_iter().chain(others).collect();
        Ok(DecisionWithClaims {
            record: self.row.into_record()?,
            claims,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{backends, sqlite_before_migration, store_with_cluster};

    fn decision(cluster_id: Uuid, i: usize) -> LoggedDecision {
        LoggedDecision {
            id: Uuid::new_v4(),
            cluster_id,
            kind: DecisionKind::Schedule,
            vm_id: Some(format!("vm{i}")),
            host_id: Some("h".to_owned()),
            answer: "{}".to_owned(),
            full: None,
            claims: vec![
                (format!("vm{i}-1"), "h".to_owned()),
                (format!("vm{i}-0"), "g".to_owned()),
            ],
            request: Some(format!(r#"{{"vm":{{"id":"vm{i}"}}}}"#)),
        }
    }

    /// Room for every decision a test logs, none trimmed by age.
    const ROOMY: Retention = Retention {
        count: 10,
        max_age: Duration::from_secs(3600),
    };

    async fn count(db: &mut Db, table: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(db.conn())
            .await
            .expect("count")
    }

    /// The log's newest `limit` decisions, of every cluster.
    async fn newest(db: &mut Db, limit: u32) -> Vec<DecisionWithClaims> {
        db.decision_page(&DecisionQuery {
            limit,
            ..DecisionQuery::default()
        })
        .await
        .expect("page")
    }

    #[tokio::test]
    async fn pages_follow_each_other_after_the_last_id_and_skip_nothing() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let roomy = ROOMY;
            // One batch: most of them share a millisecond, which `until`
            // (exclusive) would skip from one page to the next.
            let acks: Vec<_> = (0..5)
                .map(|i| store.submit((decision(cluster, i), roomy)))
                .collect();
            for ack in acks {
                ack.wait().await.expect("stored");
            }
            let mut conn = store.read().await.expect("read");
            let mut seen = Vec::new();
            let mut after = None;
            loop {
                let page = conn
                    .decision_page(&DecisionQuery {
                        after,
                        limit: 2,
                        ..DecisionQuery::default()
                    })
                    .await
                    .expect("page");
                let Some(last) = page.last() else { break };
                after = Some(last.record.id);
                seen.extend(page.iter().filter_map(|d| d.record.vm_id.clone()));
            }
            assert_eq!(seen, ["vm4", "vm3", "vm2", "vm1", "vm0"]);
        }
    }

    #[tokio::test]
    async fn a_decision_keeps_the_request_it_was_asked() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let roomy = ROOMY;
            let asked = decision(cluster, 1);
            let inline = LoggedDecision {
                request: None,
                ..decision(cluster, 2)
            };
            for d in [&asked, &inline] {
                store
                    .submit((d.clone(), roomy))
                    .wait()
                    .await
                    .expect("stored");
            }
            let mut conn = store.read().await.expect("read");
            assert_eq!(
                conn.decision_request(asked.id).await.expect("read"),
                Some(Some(r#"{"vm":{"id":"vm1"}}"#.to_owned()))
            );
            assert_eq!(
                conn.decision_request(inline.id).await.expect("read"),
                Some(None),
                "logged, without a request"
            );
            assert_eq!(
                conn.decision_request(Uuid::new_v4()).await.expect("read"),
                None,
                "not logged"
            );
        }
    }

    #[tokio::test]
    async fn decisions_are_logged_with_their_claims_and_trimmed() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let roomy = ROOMY;
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
            let page = newest(&mut conn, 10).await;
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
    }

    #[tokio::test]
    async fn a_small_log_never_shows_more_than_its_count() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
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
    }

    #[tokio::test]
    async fn the_page_filters_by_a_vm_claimed_for() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let roomy = ROOMY;
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

    /// A decision whose row is a summary and whose full answer, `bytes`
    /// long, is kept apart.
    fn large(cluster_id: Uuid, i: usize, bytes: usize) -> LoggedDecision {
        LoggedDecision {
            answer: format!("{{\"summary\":{i}}}"),
            full: Some(format!("{{\"full\":\"{}\"}}", "x".repeat(bytes - 11))),
            ..decision(cluster_id, i)
        }
    }

    #[tokio::test]
    async fn a_large_answer_is_kept_apart_from_its_summary_row() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let roomy = ROOMY;
            let big = large(cluster, 0, 100_000);
            let small = decision(cluster, 1);
            for d in [&big, &small] {
                store.log_decision(d.clone(), roomy).await.expect("logged");
            }
            let mut conn = store.read().await.expect("read");
            let listed = conn.cluster_decisions(cluster, 10).await.expect("list");
            assert_eq!(
                listed
                    .iter()
                    .map(|d| (d.answer.as_str(), d.summarized))
                    .collect::<Vec<_>>(),
                [("{}", false), (r#"{"summary":0}"#, true)],
                "rows hold the summary"
            );
            let full = conn.full_answer(big.id).await.expect("read").expect("kept");
            assert_eq!((full.cluster_id, full.answer), (cluster, big.full.clone()));
            let whole = conn
                .full_answer(small.id)
                .await
                .expect("read")
                .expect("kept");
            assert_eq!(whole.answer.as_deref(), Some("{}"), "a small row is whole");
            assert_eq!(conn.full_answer(Uuid::new_v4()).await.expect("read"), None);
            assert_eq!(
                conn.decision_log_bytes().await.expect("size"),
                LogBytes {
                    rows: (big.answer.len() + 2) as u64,
                    full: 100_000,
                }
            );
        }
    }

    #[tokio::test]
    async fn the_byte_budget_drops_the_oldest_full_answers_then_the_oldest_rows() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let roomy = Retention {
                count: 100,
                max_age: Duration::from_secs(3600),
            };
            // Room for the rows and two full answers of 1,000 bytes, not three.
            store.set_decision_log_budget(2_500);
            let logged: Vec<LoggedDecision> = (0..4).map(|i| large(cluster, i, 1_000)).collect();
            for d in &logged {
                store.log_decision(d.clone(), roomy).await.expect("logged");
            }
            let mut conn = store.read().await.expect("read");
            let mut kept = Vec::new();
            for d in &logged {
                let full = conn
                    .full_answer(d.id)
                    .await
                    .expect("read")
                    .expect("row kept");
                kept.push(full.answer.is_some());
            }
            assert_eq!(
                kept,
                [false, false, true, true],
                "oldest full answers first"
            );
            let size = conn.decision_log_bytes().await.expect("size");
            assert_eq!(size.full, 2_000);
            drop(conn);

            // Rows alone over the budget: the oldest rows go, with their
            // claims and full answers.
            store.set_decision_log_budget(30);
            store
                .log_decision(decision(cluster, 9), roomy)
                .await
                .expect("logged");
            let mut conn = store.read().await.expect("read");
            let rows: Vec<String> = conn
                .cluster_decisions(cluster, 100)
                .await
                .expect("list")
                .into_iter()
                .filter_map(|d| d.vm_id)
                .collect();
            // Each summary row is 13 bytes and the last one 2: 13 + 13 + 2 fit.
            assert_eq!(rows, ["vm9", "vm3", "vm2"]);
            let size = conn.decision_log_bytes().await.expect("size");
            assert_eq!(size, LogBytes { rows: 28, full: 0 });
            assert_eq!(count(&mut conn, "decision_answers").await, 0);
            assert_eq!(count(&mut conn, "decision_claims").await, 6);
        }
    }

    /// A decision's own claim (its VM on its host, first) lives in its
    /// row, not in `decision_claims`; read back, its claims are whole and in
    /// order, and a search by any of its VMs finds it. A claim that is not
    /// first, or not the decision's own, stays a row.
    #[tokio::test]
    async fn a_decisions_own_claim_is_kept_in_its_row_and_read_back_in_order() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let claim = |vm: &str, host: &str| (vm.to_owned(), host.to_owned());
            let logged = |vm: &str, claims: Vec<(String, String)>| LoggedDecision {
                vm_id: Some(vm.to_owned()),
                claims,
                ..decision(cluster, 0)
            };
            let cases = [
                logged("one", vec![claim("one", "h")]),
                logged("two", vec![claim("two", "h"), claim("two-b", "g")]),
                logged("later", vec![claim("other", "g"), claim("later", "h")]),
                logged("none", vec![]),
            ];
            for case in &cases {
                store
                    .log_decision(case.clone(), ROOMY)
                    .await
                    .expect("logged");
            }
            let mut conn = store.read().await.expect("read");
            assert_eq!(
                count(&mut conn, "decision_claims").await,
                3,
                "two-b, other and later: the own claims are in their rows"
            );
            let listed: Vec<_> = newest(&mut conn, 10)
                .await
                .into_iter()
                .rev()
                .map(|d| (d.record.vm_id, d.claims))
                .collect();
            let expected: Vec<_> = cases
                .iter()
                .map(|c| (c.vm_id.clone(), c.claims.clone()))
                .collect();
            assert_eq!(listed, expected, "every claim, in the order made");
            for (vm, found) in [
                ("two", "two"),
                ("two-b", "two"),
                ("one", "one"),
                ("other", "later"),
            ] {
                let page = conn
                    .decision_page(&DecisionQuery {
                        vm_id: Some(vm.to_owned()),
                        limit: 10,
                        ..DecisionQuery::default()
                    })
                    .await
                    .expect("page");
                let vms: Vec<_> = page
                    .iter()
                    .filter_map(|d| d.record.vm_id.as_deref())
                    .collect();
                assert_eq!(vms, [found], "searched by {vm}");
            }
        }
    }

    #[tokio::test]
    async fn a_large_row_answer_is_stored_packed_and_read_back_whole() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let text = format!(
                r#"{{"explain":[{}]}}"#,
                vec![r#"{"unit":"Filter","skipped":"the request has none"}"#; 40].join(",")
            );
            let logged = LoggedDecision {
                answer: text.clone(),
                ..decision(cluster, 1)
            };
            let packed = Packed::pack(&text);
            assert_eq!(packed.codec(), Codec::Zstd);
            store
                .log_decision(logged.clone(), ROOMY)
                .await
                .expect("logged");
            let mut conn = store.read().await.expect("read");
            let read = conn.decision(logged.id).await.expect("read").expect("kept");
            assert_eq!(read.answer, text);
            let full = conn.full_answer(logged.id).await.expect("read");
            assert_eq!(full.and_then(|f| f.answer), Some(text));
            let listed = newest(&mut conn, 1).await;
            assert_eq!(listed[0].record.answer, read.answer);
            assert_eq!(
                conn.decision_log_bytes().await.expect("size").rows,
                packed.bytes().len() as u64,
                "the budget counts the bytes stored"
            );
        }
    }

    /// A log written before answers were packed (migrations up to 0013),
    /// with a summarized decision's full answer and claims: migrating keeps
    /// every row, in order, with its claims, full answer and byte count
    /// (the table is rebuilt with foreign keys off, so nothing cascades),
    /// and deleting rows afterwards still cascades and counts (the rebuilt
    /// table's foreign keys and triggers).
    ///
    /// SQLite only: PostgreSQL alters the column in place.
    #[tokio::test]
    async fn answers_logged_before_packing_survive_the_migration() {
        use sqlx::Connection;

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.db");
        // Foreign keys off: the old rows need no cluster.
        let mut conn = sqlite_before_migration(&path, 14, false).await;
        let cluster = Uuid::new_v4();
        let (first, second) = (Uuid::new_v4(), Uuid::new_v4());
        for sql in [
            format!(
                "INSERT INTO decisions (id, cluster_id, kind, vm_id, host_id, answer, \
                 summarized, answer_bytes) VALUES \
                 ('{second}', '{cluster}', 'schedule', 'vm2', 'h', '{{\"b\":2}}', 0, 7), \
                 ('{first}', '{cluster}', 'schedule', 'vm1', 'h', '{{\"s\":1}}', 1, 7)"
            ),
            format!(
                "INSERT INTO decision_claims VALUES ('{second}', 'vm2', 'h'), \
                 ('{first}', 'vm1', 'h')"
            ),
            format!("INSERT INTO decision_answers VALUES ('{first}', 9, '{{\"f\":11}}')"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .expect("old rows");
        }
        conn.close().await.expect("close");

        let store = crate::store::Store::open(&path).await.expect("migrates");
        let mut conn = store.read().await.expect("read");
        let page = newest(&mut conn, 10).await;
        let rows: Vec<(&str, &str, usize)> = page
            .iter()
            .map(|d| {
                (
                    d.record.vm_id.as_deref().unwrap_or(""),
                    d.record.answer.as_str(),
                    d.claims.len(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [("vm1", r#"{"s":1}"#, 1), ("vm2", r#"{"b":2}"#, 1)],
            "rowid order kept, claims kept"
        );
        let full = conn.full_answer(first).await.expect("read").expect("kept");
        assert_eq!(full.answer.as_deref(), Some(r#"{"f":11}"#));
        assert_eq!(
            conn.decision_log_bytes().await.expect("size"),
            LogBytes { rows: 14, full: 9 }
        );
        drop(conn);
        let mut tx = store.write().await.expect("write");
        sqlx::query("DELETE FROM decisions")
            .execute(tx.conn())
            .await
            .expect("deleted");
        tx.commit().await.expect("commit");
        let mut conn = store.read().await.expect("read");
        assert_eq!(
            conn.decision_log_bytes().await.expect("size"),
            LogBytes::default(),
            "the byte triggers were made again"
        );
        assert_eq!(
            count(&mut conn, "decision_claims").await,
            0,
            "claims cascade from the rebuilt table"
        );
    }

    #[tokio::test]
    async fn the_log_size_follows_deletions_by_count_age_and_cluster() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let two = Retention {
                count: 2,
                max_age: Duration::from_secs(3600),
            };
            for i in 0..4 {
                store
                    .log_decision(large(cluster, i, 500), two)
                    .await
                    .expect("logged");
            }
            let mut conn = store.read().await.expect("read");
            let size = conn.decision_log_bytes().await.expect("size");
            assert_eq!(
                size,
                LogBytes {
                    rows: 26,
                    full: 1_000
                },
                "count trims"
            );
            drop(conn);
            let mut tx = store.write().await.expect("write");
            tx.delete_cluster(cluster).await.expect("deleted");
            tx.commit().await.expect("commit");
            let mut conn = store.read().await.expect("read");
            assert_eq!(
                conn.decision_log_bytes().await.expect("size"),
                LogBytes::default(),
                "cascades count too"
            );
        }
    }
}
