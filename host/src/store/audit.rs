//! The audit log: one row per change an admin route was asked to make,
//! with who asked and what came of it (`api::audit` records them). Rows
//! are only added, and deleted past the retention, oldest first.

use std::time::Duration;

use uuid::Uuid;

use super::rows::row_struct;
use super::{Db, StoreError, parse_id};
use crate::role::Role;
use crate::time::Timestamp;

/// What one change was, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAuditEntry {
    pub token_id: Uuid,
    pub token_name: String,
    pub role: Role,
    pub method: String,
    pub route: String,
    pub target: String,
    pub status: u16,
    pub error_code: Option<String>,
    pub request_id: Option<String>,
}

/// A stored entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: i64,
    pub at: String,
    pub entry: NewAuditEntry,
}

row_struct! {
    struct Row {
        id: i64,
        at: String,
        token_id: String,
        token_name: String,
        role: String,
        method: String,
        route: String,
        target: String,
        status: i64,
        error_code: Option<String>,
        request_id: Option<String>,
    }
}

impl Row {
    fn into_entry(self) -> Result<AuditEntry, StoreError> {
        Ok(AuditEntry {
            id: self.id,
            at: self.at,
            entry: NewAuditEntry {
                token_id: parse_id(&self.token_id)?,
                role: Role::from_name(&self.role)
                    .ok_or_else(|| StoreError::Corrupt(format!("unknown role `{}`", self.role)))?,
                token_name: self.token_name,
                method: self.method,
                route: self.route,
                target: self.target,
                status: u16::try_from(self.status)
                    .map_err(|_| StoreError::Corrupt(format!("status {}", self.status)))?,
                error_code: self.error_code,
                request_id: self.request_id,
            },
        })
    }
}

impl Db {
    /// Records `entry`, and deletes the entries older than `retained`.
    /// Changes are rare (people make them), so pruning at each one costs
    /// an indexed delete that usually finds nothing.
    pub async fn insert_audit(
        &mut self,
        entry: &NewAuditEntry,
        retained: Duration,
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query(
            "INSERT INTO audit_log (token_id, token_name, role, method, route, target, status, \
             error_code, request_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(entry.token_id.to_string())
        .bind(&entry.token_name)
        .bind(entry.role.name())
        .bind(&entry.method)
        .bind(&entry.route)
        .bind(&entry.target)
        .bind(i64::from(entry.status))
        .bind(&entry.error_code)
        .bind(&entry.request_id)
        .execute(&mut *conn)
        .await?;
        let cutoff = Timestamp::now()
            .0
            .saturating_sub(u64::try_from(retained.as_millis()).unwrap_or(u64::MAX));
        sqlx::query("DELETE FROM audit_log WHERE at < $1")
            .bind(Timestamp(cutoff).to_rfc3339())
            .execute(conn)
            .await?;
        Ok(())
    }

    /// Up to `limit` entries, newest first, older than the entry `before`
    /// when given (the next page).
    pub async fn audit_entries(
        &mut self,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let conn = self.conn();
        sqlx::query_as::<_, Row>(
            "SELECT id, at, token_id, token_name, role, method, route, target, status, \
             error_code, request_id FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(conn)
        .await?
        .into_iter()
        .map(Row::into_entry)
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::backends;

    fn entry(target: &str) -> NewAuditEntry {
        NewAuditEntry {
            token_id: Uuid::new_v4(),
            token_name: "admin".to_owned(),
            role: Role::Admin,
            method: "POST".to_owned(),
            route: "/api/v1/tokens".to_owned(),
            target: target.to_owned(),
            status: 201,
            error_code: None,
            request_id: Some("req-1".to_owned()),
        }
    }

    #[tokio::test]
    async fn entries_past_the_retention_go_and_pages_run_newest_first() {
        for db in backends().await {
            let store = db.open().await;
            let retained = Duration::from_secs(400 * 86_400);
            let mut tx = store.write().await.expect("tx");
            tx.insert_audit(&entry("old"), retained).await.expect("old");
            sqlx::query("UPDATE audit_log SET at = '2020-01-01T00:00:00.000Z'")
                .execute(tx.conn())
                .await
                .expect("age it");
            tx.insert_audit(&entry("a"), retained).await.expect("a");
            tx.insert_audit(&entry("b"), retained).await.expect("b");
            tx.commit().await.expect("commit");

            let mut conn = store.read().await.expect("read");
            let all = conn.audit_entries(None, 10).await.expect("list");
            let targets: Vec<&str> = all.iter().map(|e| e.entry.target.as_str()).collect();
            assert_eq!(targets, ["b", "a"], "the 2020 entry is past 400 days");
            assert_eq!(all[1].entry, entry("a").with_token(all[1].entry.token_id));
            let page = conn.audit_entries(Some(all[0].id), 1).await.expect("page");
            assert_eq!(page.len(), 1);
            assert_eq!(page[0].entry.target, "a");
        }
    }

    impl NewAuditEntry {
        fn with_token(mut self, token_id: Uuid) -> Self {
            self.token_id = token_id;
            self
        }
    }
}
