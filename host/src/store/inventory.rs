//! The host inventory Sandpiper holds for a cluster (migration
//! `0002_placement.sql`): each host's record as JSON at its generation,
//! the hosts removed and the generation that removed them, and the
//! cluster's held and snapshot generations. What the records mean is
//! placement's business; here they are rows.

use uuid::Uuid;

use std::collections::HashMap;

use super::{Db, ROWS_PER_STATEMENT, StoreError, generation, list, placeholders, unsigned};

/// A cluster's stored inventory, as [`Db::inventory`] reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredInventory {
    /// The held generation; 0 when nothing was stored.
    pub generation: u64,
    /// The generation of the last full snapshot; 0 when none.
    pub snapshot_generation: u64,
    /// Each host's record (JSON), in the order stored: snapshot order,
    /// then hosts added since.
    pub records: Vec<String>,
    /// Removed hosts and the generation that removed each.
    pub removed: Vec<(String, u64)>,
}

/// What becomes of one stored host in a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostWrite {
    /// The host's record (JSON) at `generation`.
    Put { generation: u64, record: String },
    /// Removed at this generation.
    Removed(u64),
}

/// A batch's writes to one cluster's inventory, reduced to their final
/// effect.
#[derive(Default)]
pub(crate) struct InventoryWrites {
    /// A snapshot replaced every host: the stored ones go first.
    pub(super) replaced: bool,
    /// In first-seen order, which is snapshot order for a snapshot's hosts
    /// (row order is host order after a restart).
    pub(super) hosts: Vec<(String, HostWrite)>,
    host_index: HashMap<String, usize>,
    /// (held generation, snapshot generation).
    pub(super) generations: Option<(u64, u64)>,
}

impl InventoryWrites {
    /// A snapshot replaces every stored host; its hosts follow.
    pub(crate) fn replace(&mut self) {
        self.replaced = true;
        self.hosts.clear();
        self.host_index.clear();
    }

    /// The host's latest write in the batch, in the place of its first.
    pub(crate) fn host(&mut self, host_id: &str, write: HostWrite) {
        match self.host_index.get(host_id) {
            Some(&i) => self.hosts[i].1 = write,
            None => {
                self.host_index.insert(host_id.to_owned(), self.hosts.len());
                self.hosts.push((host_id.to_owned(), write));
            }
        }
    }
}

impl Db {
    /// The inventory stored for `cluster_id`; empty when none was.
    pub async fn inventory(&mut self, cluster_id: Uuid) -> Result<StoredInventory, StoreError> {
        let conn = self.conn();
        let cluster = cluster_id.to_string();
        let generations: Option<(i64, i64)> = sqlx::query_as(
            "SELECT generation, snapshot_generation FROM inventory_clusters WHERE cluster_id = $1",
        )
        .bind(&cluster)
        .fetch_optional(&mut *conn)
        .await?;
        let records: Vec<String> = sqlx::query_scalar(
            "SELECT record FROM inventory_hosts WHERE cluster_id = $1 ORDER BY rowid",
        )
        .bind(&cluster)
        .fetch_all(&mut *conn)
        .await?;
        let removed: Vec<(String, i64)> = sqlx::query_as(
            "SELECT host_id, generation FROM inventory_removed WHERE cluster_id = $1",
        )
        .bind(&cluster)
        .fetch_all(&mut *conn)
        .await?;
        let (generation, snapshot_generation) = generations
            .map(|(g, s)| (unsigned(g), unsigned(s)))
            .unwrap_or((0, 0));
        Ok(StoredInventory {
            generation,
            snapshot_generation,
            records,
            removed: removed
                .into_iter()
                .map(|(id, g)| (id, unsigned(g)))
                .collect(),
        })
    }

    /// Applies a batch's writes to one cluster's inventory, a multi-row
    /// statement per kind of row.
    pub(super) async fn write_inventory(
        &mut self,
        cluster_id: Uuid,
        writes: &InventoryWrites,
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        let cluster = cluster_id.to_string();
        if writes.replaced {
            for table in ["inventory_hosts", "inventory_removed"] {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DELETE FROM {table} WHERE cluster_id = $1"
                )))
                .bind(&cluster)
                .execute(&mut *conn)
                .await?;
            }
        }
        let puts: Vec<(&str, u64, &str)> = writes
            .hosts
            .iter()
            .filter_map(|(id, w)| match w {
                HostWrite::Put { generation, record } => {
                    Some((id.as_str(), *generation, record.as_str()))
                }
                HostWrite::Removed(_) => None,
            })
            .collect();
        for chunk in puts.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO inventory_hosts (cluster_id, host_id, generation, record) VALUES {} \
                 ON CONFLICT (cluster_id, host_id) \
                 DO UPDATE SET generation = excluded.generation, record = excluded.record",
                placeholders(1, chunk.len(), 4)
            )));
            for (id, at, record) in chunk {
                query = query
                    .bind(&cluster)
                    .bind(*id)
                    .bind(generation(*at)?)
                    .bind(*record);
            }
            query.execute(&mut *conn).await?;
            if !writes.replaced {
                let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DELETE FROM inventory_removed WHERE cluster_id = $1 AND host_id IN ({})",
                    list(2, chunk.len())
                )))
                .bind(&cluster);
                for (id, _, _) in chunk {
                    query = query.bind(*id);
                }
                query.execute(&mut *conn).await?;
            }
        }
        let removed: Vec<(&str, u64)> = writes
            .hosts
            .iter()
            .filter_map(|(id, w)| match w {
                HostWrite::Removed(generation) => Some((id.as_str(), *generation)),
                HostWrite::Put { .. } => None,
            })
            .collect();
        for chunk in removed.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM inventory_hosts WHERE cluster_id = $1 AND host_id IN ({})",
                list(2, chunk.len())
            )))
            .bind(&cluster);
            for (id, _) in chunk {
                query = query.bind(*id);
            }
            query.execute(&mut *conn).await?;
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO inventory_removed (cluster_id, host_id, generation) VALUES {} \
                 ON CONFLICT (cluster_id, host_id) DO UPDATE SET generation = excluded.generation",
                placeholders(1, chunk.len(), 3)
            )));
            for (id, removed_at) in chunk {
                query = query
                    .bind(&cluster)
                    .bind(*id)
                    .bind(generation(*removed_at)?);
            }
            query.execute(&mut *conn).await?;
        }
        if let Some((held, snapshot_generation)) = writes.generations {
            sqlx::query(
                "INSERT INTO inventory_clusters (cluster_id, generation, snapshot_generation) \
                 VALUES ($1, $2, $3) ON CONFLICT (cluster_id) DO UPDATE SET \
                 generation = excluded.generation, snapshot_generation = excluded.snapshot_generation",
            )
            .bind(&cluster)
            .bind(generation(held)?)
            .bind(generation(snapshot_generation)?)
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }
}
