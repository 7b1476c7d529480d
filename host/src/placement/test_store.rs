//! For the placement tests: a real SQLite store holding one cluster (and
//! the policy it must name), as the placement state's rows refer to it.

use uuid::Uuid;

use crate::store::Store;

/// Opens a store in `dir` with one cluster; returns the store and the
/// cluster's id.
pub async fn store_with_cluster(dir: &std::path::Path) -> (Store, Uuid) {
    let store = Store::open(&dir.join("test.db"))
        .await
        .expect("store opens");
    let cluster = Uuid::new_v4();
    let policy = Uuid::new_v4().to_string();
    let mut tx = store.write().await.expect("write");
    sqlx::query(
        "INSERT INTO scheduling_policies (id, name, description, combination) \
         VALUES (?, 'p', '', 'rank')",
    )
    .bind(&policy)
    .execute(&mut *tx)
    .await
    .expect("policy row");
    sqlx::query("INSERT INTO clusters (id, name, description, policy_id) VALUES (?, 'c', '', ?)")
        .bind(cluster.to_string())
        .bind(&policy)
        .execute(&mut *tx)
        .await
        .expect("cluster row");
    tx.commit().await.expect("commit");
    (store, cluster)
}
