//! The claims decisions recorded against held inventories (migration
//! `0002_placement.sql`), one per VM and cluster: which host, what it
//! holds (JSON), which decision made it, when it expires, and from which
//! inventory generation on a confirmed claim is covered by reported usage.

use uuid::Uuid;

use std::collections::BTreeMap;

use super::{
    Db, ROWS_PER_STATEMENT, StoreError, generation, list, parse_id, placeholders, unsigned,
};

/// A stored claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRow {
    pub vm_id: String,
    pub host_id: String,
    /// What the claim holds on its host, as JSON.
    pub resources: String,
    pub decision_id: Uuid,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
    /// `None` while pending; once confirmed, the inventory generation from
    /// which the host's reported usage includes the VM.
    pub covered_from: Option<u64>,
}

/// A batch's writes to one cluster's claims, by VM: `None`, the claim is
/// gone.
pub(crate) type ClaimWrites = BTreeMap<String, Option<ClaimRow>>;

fn millis(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Db {
    /// Every claim stored for `cluster_id`.
    pub async fn claims(&mut self, cluster_id: Uuid) -> Result<Vec<ClaimRow>, StoreError> {
        type Row = (String, String, String, String, i64, i64, Option<i64>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT vm_id, host_id, resources, decision_id, created_at_ms, expires_at_ms, \
             covered_from FROM claims WHERE cluster_id = $1",
        )
        .bind(cluster_id.to_string())
        .fetch_all(self.conn())
        .await?;
        rows.into_iter()
            .map(
                |(vm_id, host_id, resources, decision_id, created, expires, covered)| {
                    Ok(ClaimRow {
                        vm_id,
                        host_id,
                        resources,
                        decision_id: parse_id(&decision_id)?,
                        created_at_ms: unsigned(created),
                        expires_at_ms: unsigned(expires),
                        covered_from: covered.map(unsigned),
                    })
                },
            )
            .collect()
    }

    /// Applies a batch's writes to one cluster's claims: one statement for
    /// the deleted, one for the stored (per [`ROWS_PER_STATEMENT`] rows).
    pub(super) async fn write_claims(
        &mut self,
        cluster_id: Uuid,
        writes: &ClaimWrites,
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        let cluster = cluster_id.to_string();
        let gone: Vec<&str> = writes
            .iter()
            .filter(|(_, c)| c.is_none())
            .map(|(vm, _)| vm.as_str())
            .collect();
        for chunk in gone.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM claims WHERE cluster_id = $1 AND vm_id IN ({})",
                list(2, chunk.len())
            )))
            .bind(&cluster);
            for vm in chunk {
                query = query.bind(*vm);
            }
            query.execute(&mut *conn).await?;
        }
        let put: Vec<&ClaimRow> = writes.values().filter_map(Option::as_ref).collect();
        for chunk in put.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO claims (cluster_id, vm_id, host_id, resources, decision_id, \
                 created_at_ms, expires_at_ms, covered_from) VALUES {} \
                 ON CONFLICT (cluster_id, vm_id) DO UPDATE SET host_id = excluded.host_id, \
                 resources = excluded.resources, decision_id = excluded.decision_id, \
                 created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms, \
                 covered_from = excluded.covered_from",
                placeholders(1, chunk.len(), 8)
            )));
            for claim in chunk {
                let covered_from = claim.covered_from.map(generation).transpose()?;
                query = query
                    .bind(&cluster)
                    .bind(&claim.vm_id)
                    .bind(&claim.host_id)
                    .bind(&claim.resources)
                    .bind(claim.decision_id.to_string())
                    .bind(millis(claim.created_at_ms))
                    .bind(millis(claim.expires_at_ms))
                    .bind(covered_from);
            }
            query.execute(&mut *conn).await?;
        }
        Ok(())
    }
}
