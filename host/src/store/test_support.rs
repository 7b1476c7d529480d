//! For tests of the store and of placement: a real SQLite store holding one
//! cluster (and the policy it must name), as placement rows refer to it.

use uuid::Uuid;

use super::clusters::ClusterRecord;
use super::policies::PolicyRecord;
use super::{Store, StoreLimits};
use crate::pipeline::{Combination, ParamValues};

/// Opens a store in `dir` with one cluster; returns the store and the
/// cluster's id.
pub async fn store_with_cluster(dir: &std::path::Path) -> (Store, Uuid) {
    store_with_cluster_limited(dir, StoreLimits::default()).await
}

/// [`store_with_cluster`] with connection settings of the test's choosing.
pub async fn store_with_cluster_limited(
    dir: &std::path::Path,
    limits: StoreLimits,
) -> (Store, Uuid) {
    let store = Store::open_with(&dir.join("test.db"), limits)
        .await
        .expect("store opens");
    let policy = PolicyRecord {
        id: Uuid::new_v4(),
        name: "p".to_owned(),
        description: String::new(),
        locked: false,
        is_default: false,
        combination: Combination::Rank,
        params: ParamValues::new(),
        filters: Vec::new(),
        weights: Vec::new(),
        balance: None,
        created_at: String::new(),
        updated_at: String::new(),
    };
    let cluster = ClusterRecord {
        id: Uuid::new_v4(),
        name: "c".to_owned(),
        description: String::new(),
        policy_id: policy.id,
        params: ParamValues::new(),
        balance: Default::default(),
        created_at: String::new(),
        updated_at: String::new(),
    };
    let mut tx = store.write().await.expect("write");
    tx.save_policy(&policy).await.expect("policy row");
    tx.save_cluster(&cluster).await.expect("cluster row");
    tx.commit().await.expect("commit");
    (store, cluster.id)
}
