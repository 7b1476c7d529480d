//! The fleet's tables (PostgreSQL migration `0002_fleet.sql`): which
//! replica owns each cluster until when, and the configuration generation
//! replicas poll. Every statement here runs on PostgreSQL only: an SQLite
//! store has one process, which owns every cluster (`crate::fleet`).
//!
//! Lease times are the database's clock (`now()`), so replicas whose
//! clocks disagree still agree on who owns what.

use std::time::Duration;

use uuid::Uuid;

use super::{Db, StoreError, parse_id};

/// A cluster's owner as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRow {
    pub replica_id: String,
    /// Where the owner takes forwarded requests.
    pub url: String,
    /// Raised at every change of owner: the writer's fence.
    pub epoch: i64,
}

/// A lease length as PostgreSQL's interval in milliseconds.
fn millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

impl Db {
    /// Takes `cluster_id` for `replica_id` if nobody holds it (no row, or
    /// an expired one), or renews it if `replica_id` already does; either
    /// way returns who owns it now (`None`: there is no such cluster). A
    /// new owner gets a new epoch; a renewal keeps it.
    pub async fn take_cluster(
        &mut self,
        cluster_id: Uuid,
        replica_id: &str,
        url: &str,
        ttl: Duration,
    ) -> Result<Option<OwnerRow>, StoreError> {
        let conn = self.conn();
        let taken: Option<(String, String, i64)> = sqlx::query_as(
            "INSERT INTO cluster_owners (cluster_id, replica_id, url, epoch, expires_at) \
             SELECT $1, $2, $3, 1, now() + $4 * interval '1 millisecond' \
             WHERE EXISTS (SELECT 1 FROM clusters WHERE id = $1) \
             ON CONFLICT (cluster_id) DO UPDATE SET \
                 epoch = CASE WHEN cluster_owners.replica_id = excluded.replica_id \
                              AND cluster_owners.expires_at > now() \
                         THEN cluster_owners.epoch ELSE cluster_owners.epoch + 1 END, \
                 replica_id = excluded.replica_id, url = excluded.url, \
                 expires_at = excluded.expires_at \
             WHERE cluster_owners.expires_at <= now() \
                OR cluster_owners.replica_id = excluded.replica_id \
             RETURNING replica_id, url, epoch",
        )
        .bind(cluster_id.to_string())
        .bind(replica_id)
        .bind(url)
        .bind(millis(ttl))
        .fetch_optional(&mut *conn)
        .await?;
        let owner = match taken {
            Some(row) => Some(row),
            None => {
                sqlx::query_as(
                    "SELECT replica_id, url, epoch FROM cluster_owners WHERE cluster_id = $1",
                )
                .bind(cluster_id.to_string())
                .fetch_optional(&mut *conn)
                .await?
            }
        };
        Ok(owner.map(|(replica_id, url, epoch)| OwnerRow {
            replica_id,
            url,
            epoch,
        }))
    }

    /// Extends every unexpired lease of `replica_id` by `ttl`; returns the
    /// clusters it still owns, with their epochs. A lease that expired
    /// before its renewal is not renewed (another replica may have taken
    /// it, or may at any moment).
    pub async fn renew_clusters(
        &mut self,
        replica_id: &str,
        ttl: Duration,
    ) -> Result<Vec<(Uuid, i64)>, StoreError> {
        // The rows are locked in cluster order, the order in which the
        // writer's fence holds them (`holds_cluster`, over a map by id):
        // one order, so the two cannot deadlock.
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "UPDATE cluster_owners SET expires_at = now() + $2 * interval '1 millisecond' \
             WHERE cluster_id IN (SELECT cluster_id FROM cluster_owners \
                 WHERE replica_id = $1 AND expires_at > now() ORDER BY cluster_id COLLATE \"C\" FOR UPDATE) \
             RETURNING cluster_id, epoch",
        )
        .bind(replica_id)
        .bind(millis(ttl))
        .fetch_all(self.conn())
        .await?;
        rows.into_iter()
            .map(|(id, epoch)| Ok((parse_id(&id)?, epoch)))
            .collect()
    }

    /// Gives up every cluster of `replica_id` at once (a replica stopping
    /// cleanly), so the others take them over at their next request
    /// instead of after the lease runs out.
    pub async fn release_clusters(&mut self, replica_id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE cluster_owners SET expires_at = now() \
             WHERE replica_id = $1 AND expires_at > now()",
        )
        .bind(replica_id)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Whether `replica_id` still owns `cluster_id` under `epoch`: checked
    /// inside the transaction that writes the cluster's placement rows,
    /// holding the row (`FOR SHARE`) so that no other replica can take the
    /// cluster over until that transaction ends.
    pub async fn holds_cluster(
        &mut self,
        cluster_id: Uuid,
        replica_id: &str,
        epoch: i64,
    ) -> Result<bool, StoreError> {
        let held: Option<i64> = sqlx::query_scalar(
            "SELECT epoch FROM cluster_owners WHERE cluster_id = $1 AND replica_id = $2 \
             AND epoch = $3 AND expires_at > now() FOR SHARE",
        )
        .bind(cluster_id.to_string())
        .bind(replica_id)
        .bind(epoch)
        .fetch_optional(self.conn())
        .await?;
        Ok(held.is_some())
    }

    /// The configuration's generation, raised after every admin change.
    pub async fn config_generation(&mut self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT generation FROM config_generation WHERE id = 0")
                .fetch_one(self.conn())
                .await?,
        )
    }

    /// Raises the configuration's generation: the other replicas reload.
    pub async fn bump_config_generation(&mut self) -> Result<(), StoreError> {
        sqlx::query("UPDATE config_generation SET generation = generation + 1 WHERE id = 0")
            .execute(self.conn())
            .await?;
        Ok(())
    }
}
