//! The decisions log: what was decided for a cluster and why (the explain
//! record), kept for a bounded number of decisions per cluster.
//!
//! Every row is bounded whatever went into the decision (issue #11): its
//! answer holds at most [`MAX_ANSWER_BYTES`] (callers store a summary of a
//! larger answer, and the full one in `decision_details` under a byte
//! budget of its own), its id columns at most [`MAX_ID_COLUMN_BYTES`], and
//! it records its size so that the log is trimmed by bytes too.

use std::borrow::Cow;

use uuid::Uuid;

use super::{SqliteConnection, StoreError, parse_id};

/// Largest answer a decision row holds, bytes. An explain summary of a
/// decision over any number of hosts is a few kilobytes (its lists are
/// capped), so 64 KiB keeps every honest summary whole, while 500 rows of a
/// listing stay far below what a client can take. A larger answer is
/// stored as a summary by its caller, or replaced here by a stub that says
/// how large it was.
pub const MAX_ANSWER_BYTES: usize = 64 << 10;

/// Longest VM or host id kept in a row's id columns, bytes. Ids are
/// validated at the API (tens of bytes in practice); this only bounds the
/// row whatever gets through, so a longer id is cut at a character
/// boundary (it then no longer matches a `vm_id` search).
pub const MAX_ID_COLUMN_BYTES: usize = 1024;

/// Largest full answer kept in `decision_details`, bytes: the request body
/// limit's default, so a full answer the server could produce is kept
/// (100,000 hosts inline explain themselves in ~47 MB).
pub const MAX_DETAIL_BYTES: usize = 64 << 20;

/// Bytes of full answers kept server-wide, oldest dropped first: two of the
/// largest answers, or hundreds of merely large ones. Their summaries stay
/// in the log after the full answer is dropped.
pub const DEFAULT_DETAILS_BUDGET_BYTES: u64 = 128 << 20;

/// A row's columns within their bounds (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct BoundedRow<'a> {
    pub vm_id: Option<&'a str>,
    pub host_id: Option<&'a str>,
    pub answer: Cow<'a, str>,
    /// What the row counts against the log's byte budget.
    pub size_bytes: i64,
}

/// `decision`'s columns cut to their bounds: ids to
/// [`MAX_ID_COLUMN_BYTES`], an answer over [`MAX_ANSWER_BYTES`] replaced by
/// a stub naming its size (valid JSON, so listings still parse).
pub fn bounded_row<'a>(
    id: Uuid,
    vm_id: Option<&'a str>,
    host_id: Option<&'a str>,
    answer: &'a str,
) -> BoundedRow<'a> {
    let vm_id = vm_id.map(|v| cut(v, MAX_ID_COLUMN_BYTES));
    let host_id = host_id.map(|h| cut(h, MAX_ID_COLUMN_BYTES));
    let answer: Cow<'a, str> = if answer.len() <= MAX_ANSWER_BYTES {
        Cow::Borrowed(answer)
    } else {
        Cow::Owned(
            serde_json::json!({
                "decision_id": id,
                "truncated": {
                    "answer_bytes": answer.len(),
                    "max_answer_bytes": MAX_ANSWER_BYTES,
                },
            })
            .to_string(),
        )
    };
    let size = answer.len() + vm_id.map_or(0, str::len) + host_id.map_or(0, str::len);
    BoundedRow {
        vm_id,
        host_id,
        answer,
        size_bytes: i64::try_from(size).unwrap_or(i64::MAX),
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

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
    let row = bounded_row(
        decision.id,
        decision.vm_id.as_deref(),
        decision.host_id.as_deref(),
        &decision.answer,
    );
    sqlx::query(
        "INSERT INTO decisions (id, cluster_id, kind, vm_id, host_id, answer, size_bytes) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(decision.id.to_string())
    .bind(&cluster_id)
    .bind(decision.kind.name())
    .bind(row.vm_id)
    .bind(row.host_id)
    .bind(row.answer.as_ref())
    .bind(row.size_bytes)
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

/// Keeps the full answer of a decision whose row holds a summary; `false`
/// (and nothing kept) when it is larger than [`MAX_DETAIL_BYTES`].
pub async fn insert_detail(
    conn: &mut SqliteConnection,
    id: Uuid,
    answer: &str,
) -> Result<bool, StoreError> {
    if answer.len() > MAX_DETAIL_BYTES {
        return Ok(false);
    }
    sqlx::query("INSERT INTO decision_details (decision_id, answer, size_bytes) VALUES (?, ?, ?)")
        .bind(id.to_string())
        .bind(answer)
        .bind(i64::try_from(answer.len()).unwrap_or(i64::MAX))
        .execute(&mut *conn)
        .await?;
    Ok(true)
}

/// A decision's full answer, while it is kept.
pub async fn get_detail(
    conn: &mut SqliteConnection,
    id: Uuid,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT answer FROM decision_details WHERE decision_id = ?")
            .bind(id.to_string())
            .fetch_optional(conn)
            .await?,
    )
}

/// Forgets the oldest full answers beyond `budget` bytes, server-wide.
pub async fn trim_details(conn: &mut SqliteConnection, budget: u64) -> Result<(), StoreError> {
    sqlx::query(
        "DELETE FROM decision_details WHERE rowid IN ( \
             SELECT rowid FROM ( \
                 SELECT rowid, SUM(size_bytes) OVER (ORDER BY rowid DESC) AS kept \
                 FROM decision_details) \
             WHERE kept > ?)",
    )
    .bind(i64::try_from(budget).unwrap_or(i64::MAX))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Forgets a cluster's oldest decisions beyond `max_bytes` of rows (their
/// full answers go with them).
pub async fn trim_bytes(
    conn: &mut SqliteConnection,
    cluster_id: Uuid,
    max_bytes: u64,
) -> Result<(), StoreError> {
    sqlx::query(
        "DELETE FROM decisions WHERE cluster_id = ?1 AND rowid IN ( \
             SELECT rowid FROM ( \
                 SELECT rowid, SUM(size_bytes) OVER (ORDER BY rowid DESC) AS kept \
                 FROM decisions WHERE cluster_id = ?1) \
             WHERE kept > ?2)",
    )
    .bind(cluster_id.to_string())
    .bind(i64::try_from(max_bytes).unwrap_or(i64::MAX))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_bounded_whatever_goes_in() {
        let id = Uuid::new_v4();
        let huge_id = "v".repeat(10 << 20);
        let huge_answer = format!("{{\"vm_id\":\"{huge_id}\"}}");
        let row = bounded_row(id, Some(&huge_id), Some("h\u{e9}"), &huge_answer);
        assert_eq!(row.vm_id.map(str::len), Some(MAX_ID_COLUMN_BYTES));
        assert!(row.answer.len() < 1024, "{}", row.answer);
        let stub: serde_json::Value = serde_json::from_str(&row.answer).expect("JSON");
        assert_eq!(stub["truncated"]["answer_bytes"], huge_answer.len());
        assert!(row.size_bytes <= (MAX_ANSWER_BYTES + 2 * MAX_ID_COLUMN_BYTES) as i64);
        // A small row is kept as it is.
        let small = bounded_row(id, Some("vm"), None, "{}");
        assert_eq!((small.vm_id, small.answer.as_ref()), (Some("vm"), "{}"));
        assert_eq!(small.size_bytes, 4);
        // Cut at a character boundary.
        assert_eq!(cut("a\u{e9}", 2), "a");
    }
}
