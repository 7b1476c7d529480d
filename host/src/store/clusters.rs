//! Clusters: the policy each one runs and its parameter overrides.

use uuid::Uuid;

use super::rows::row_struct;
use super::{Db, StoreError, flag, parse_id};
use crate::pipeline::ParamValues;

/// A stored cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterRecord {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub policy_id: Uuid,
    /// Overrides of the policy's values and the units' defaults.
    pub params: ParamValues,
    /// When Sandpiper balances the cluster on its own.
    pub balance: PeriodicBalance,
    pub created_at: String,
    pub updated_at: String,
}

/// Whether and how often the cluster's held inventory is balanced by
/// Sandpiper itself (oVirt's `VdsLoadBalancingIntervalInMinutes`); only a
/// cluster whose policy has a balance unit ever is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeriodicBalance {
    pub enabled: bool,
    /// Seconds between two rounds, [`MIN_BALANCE_INTERVAL_SECONDS`] to
    /// [`MAX_BALANCE_INTERVAL_SECONDS`] (the schema checks it too).
    pub interval_seconds: u32,
}

/// A new cluster's balance interval: oVirt's default is one minute.
pub const DEFAULT_BALANCE_INTERVAL_SECONDS: u32 = 60;
pub const MIN_BALANCE_INTERVAL_SECONDS: u32 = 1;
/// A day: a cluster balanced less often than that should disable it.
pub const MAX_BALANCE_INTERVAL_SECONDS: u32 = 86_400;

impl PeriodicBalance {
    /// The settings as stored (a 0/1 flag and seconds).
    fn stored(enabled: i64, interval_seconds: i64) -> PeriodicBalance {
        PeriodicBalance {
            enabled: flag(enabled),
            interval_seconds: u32::try_from(interval_seconds)
                .unwrap_or(MAX_BALANCE_INTERVAL_SECONDS),
        }
    }
}

impl Default for PeriodicBalance {
    fn default() -> Self {
        PeriodicBalance {
            enabled: true,
            interval_seconds: DEFAULT_BALANCE_INTERVAL_SECONDS,
        }
    }
}

row_struct! {
    struct Row {
        id: String,
        name: String,
        description: String,
        policy_id: String,
        periodic_balance: i64,
        balance_interval_seconds: i64,
        created_at: String,
        updated_at: String,
    }
}

const SELECT: &str = "SELECT id, name, description, policy_id, periodic_balance, \
                      balance_interval_seconds, created_at, updated_at FROM clusters";

async fn complete(conn: &mut sqlx::AnyConnection, row: Row) -> Result<ClusterRecord, StoreError> {
    let params = sqlx::query_as::<_, (String, String)>(
        "SELECT name, value FROM cluster_params WHERE cluster_id = $1 ORDER BY name",
    )
    .bind(&row.id)
    .fetch_all(conn)
    .await?
    .into_iter()
    .collect();
    Ok(ClusterRecord {
        id: parse_id(&row.id)?,
        name: row.name,
        description: row.description,
        policy_id: parse_id(&row.policy_id)?,
        params,
        balance: PeriodicBalance::stored(row.periodic_balance, row.balance_interval_seconds),
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

impl Db {
    /// Every cluster, by name.
    pub async fn clusters(&mut self) -> Result<Vec<ClusterRecord>, StoreError> {
        let name = self.by_bytes("name");
        let conn = self.conn();
        let rows =
            sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} ORDER BY {name}")))
                .fetch_all(&mut *conn)
                .await?;
        let mut clusters = Vec::with_capacity(rows.len());
        for row in rows {
            clusters.push(complete(conn, row).await?);
        }
        Ok(clusters)
    }

    pub async fn cluster(&mut self, id: Uuid) -> Result<Option<ClusterRecord>, StoreError> {
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

    /// Every cluster's periodic balance settings, in one statement: the
    /// balance loop reads them four times a second, and a whole
    /// [`ClusterRecord`] would cost a statement per cluster for its
    /// overrides.
    pub async fn balance_settings(&mut self) -> Result<Vec<(Uuid, PeriodicBalance)>, StoreError> {
        let rows = sqlx::query_as::<_, (String, i64, i64)>(
            "SELECT id, periodic_balance, balance_interval_seconds FROM clusters",
        )
        .fetch_all(self.conn())
        .await?;
        rows.into_iter()
            .map(|(id, enabled, interval_seconds)| {
                Ok((
                    parse_id(&id)?,
                    PeriodicBalance::stored(enabled, interval_seconds),
                ))
            })
            .collect()
    }

    /// The clusters that run policy `policy_id`.
    pub async fn clusters_with_policy(
        &mut self,
        policy_id: Uuid,
    ) -> Result<Vec<ClusterRecord>, StoreError> {
        let name = self.by_bytes("name");
        let conn = self.conn();
        let rows = sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!(
            "{SELECT} WHERE policy_id = $1 ORDER BY {name}"
        )))
        .bind(policy_id.to_string())
        .fetch_all(&mut *conn)
        .await?;
        let mut clusters = Vec::with_capacity(rows.len());
        for row in rows {
            clusters.push(complete(conn, row).await?);
        }
        Ok(clusters)
    }

    /// Writes `cluster` as a whole (row and overrides), inserting or replacing.
    pub async fn save_cluster(&mut self, cluster: &ClusterRecord) -> Result<(), StoreError> {
        let now = self.now();
        let conn = self.conn();
        let id = cluster.id.to_string();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO clusters (id, name, description, policy_id, periodic_balance, \
             balance_interval_seconds) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (id) DO UPDATE SET name = $2, description = $3, policy_id = $4, \
             periodic_balance = $5, balance_interval_seconds = $6, updated_at = {now}"
        )))
        .bind(&id)
        .bind(&cluster.name)
        .bind(&cluster.description)
        .bind(cluster.policy_id.to_string())
        .bind(i64::from(cluster.balance.enabled))
        .bind(i64::from(cluster.balance.interval_seconds))
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM cluster_params WHERE cluster_id = $1")
            .bind(&id)
            .execute(&mut *conn)
            .await?;
        for (name, value) in &cluster.params {
            sqlx::query("INSERT INTO cluster_params (cluster_id, name, value) VALUES ($1, $2, $3)")
                .bind(&id)
                .bind(name)
                .bind(value)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    pub async fn delete_cluster(&mut self, id: Uuid) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query("DELETE FROM clusters WHERE id = $1")
            .bind(id.to_string())
            .execute(conn)
            .await?;
        Ok(())
    }

    /// The id of the cluster called `name`, if any.
    pub async fn cluster_id_by_name(&mut self, name: &str) -> Result<Option<Uuid>, StoreError> {
        self.id_by_name("clusters", name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{TestDb, backends};
    use crate::store::{Location, Store};

    fn cluster(name: &str, policy_id: Uuid) -> ClusterRecord {
        ClusterRecord {
            id: Uuid::new_v4(),
            name: name.to_owned(),
            description: String::new(),
            policy_id,
            params: ParamValues::new(),
            balance: PeriodicBalance::default(),
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    /// A store with one policy and clusters of these names.
    async fn with_clusters(store: &Store, names: &[&str]) -> Uuid {
        let policy = crate::store::policies::PolicyRecord {
            id: Uuid::new_v4(),
            name: "p".to_owned(),
            description: String::new(),
            locked: false,
            is_default: false,
            combination: crate::pipeline::Combination::Rank,
            params: ParamValues::new(),
            filters: Vec::new(),
            weights: Vec::new(),
            balance: None,
            created_at: String::new(),
            updated_at: String::new(),
        };
        let mut tx = store.write().await.expect("write");
        tx.save_policy(&policy).await.expect("policy");
        for name in names {
            tx.save_cluster(&cluster(name, policy.id))
                .await
                .expect("cluster");
        }
        tx.commit().await.expect("commit");
        policy.id
    }

    /// Names list in byte order, SQLite's `BINARY`, on every backend and
    /// whatever a PostgreSQL database's collation: also on one whose
    /// collation (ICU's en-US) would put `_x` first and `C` last.
    #[tokio::test]
    async fn clusters_list_by_name_in_byte_order_whatever_the_collation() {
        let [sqlite, postgres] = backends().await;
        let icu =
            TestDb::postgres_with("TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")
                .await;
        assert!(matches!(icu.location, Location::Postgres(_)));
        for db in [sqlite, postgres, icu] {
            let store = db.open().await;
            let policy = with_clusters(&store, &["b", "C", "_x", "a"]).await;
            let mut conn = store.read().await.expect("read");
            let names = |clusters: Vec<ClusterRecord>| -> Vec<String> {
                clusters.into_iter().map(|c| c.name).collect()
            };
            let bytes = ["C", "_x", "a", "b"];
            assert_eq!(names(conn.clusters().await.expect("list")), bytes);
            assert_eq!(
                names(conn.clusters_with_policy(policy).await.expect("list")),
                bytes
            );
            assert_eq!(
                conn.clusters_using_policy(policy).await.expect("list"),
                bytes
            );
        }
    }

    /// A name taken regardless of case is a constraint violation on both
    /// backends (the API answers it 409, not 500).
    #[tokio::test]
    async fn a_name_taken_in_another_case_is_a_constraint_violation() {
        for db in backends().await {
            let store = db.open().await;
            let policy = with_clusters(&store, &["Prod"]).await;
            let mut tx = store.write().await.expect("write");
            let refused = tx.save_cluster(&cluster("pROD", policy)).await;
            assert!(
                refused
                    .as_ref()
                    .is_err_and(StoreError::is_constraint_violation),
                "{refused:?}"
            );
            drop(tx);
            let mut conn = store.read().await.expect("read");
            assert_eq!(conn.clusters().await.expect("list").len(), 1);
            assert!(
                conn.cluster_id_by_name("PROD")
                    .await
                    .expect("lookup")
                    .is_some()
            );
        }
    }
}
