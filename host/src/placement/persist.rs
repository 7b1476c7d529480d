//! Keeping placement state across restarts: what each change to a
//! cluster's state writes ([`Op`], turned into the store's rows), queued
//! to the store's one background writer in the order the changes happened,
//! and a cluster's state loaded back ([`load`]).
//!
//! Every operation changes the in-memory state under its cluster's lock
//! and, still under the lock, queues the resulting [`Change`]s here ([`Unqueued`]), so the
//! queue holds them in the order they happened. The store's writer applies
//! whatever is queued in one transaction (group commit) and acknowledges
//! each job; a request answers only once its job is acknowledged, so a
//! claim the engine was told about is on disk (see [`crate::store::writer`]).
//! The rows are encoded on the writer's task, not under the cluster's lock.
//!
//! If a transaction fails, the jobs in it get the error and their requests
//! answer 500; the in-memory state keeps the change, which for a claim is
//! the safe direction (capacity held, not double-booked) until the claim
//! expires or the server restarts from what was stored.

use std::collections::HashMap;

use uuid::Uuid;

use super::claims::{Claim, ClaimState};
use super::cluster::{Change, ClusterState};
use super::hosts::{HostInventory, HostRecord};
use super::resources::Resources;
use super::time::Timestamp;
use crate::store::claims::ClaimRow;
pub use crate::store::decisions::{LoggedDecision, Retention};
use crate::store::writer::Batch;
pub use crate::store::{Ack, PersistError};
use crate::store::{Rows, Store, StoreError};

/// Something to store.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Changes {
        cluster_id: Uuid,
        changes: Vec<Change>,
    },
    Decision(LoggedDecision),
}

/// The queue of a placement service's writes: the store's writer, with the
/// retention its decisions are logged under. Cloning shares the queue.
#[derive(Clone, Debug)]
pub struct Persister {
    store: Store,
    retention: Retention,
}

impl Persister {
    /// Queues to `store`'s writer; decisions are kept to `retention`.
    pub fn start(store: Store, retention: Retention) -> Persister {
        Persister { store, retention }
    }

    /// Says a decision's writes are on their way: the writer holds the
    /// batch it is taking open for them (`crate::store::writer`).
    pub fn expect(&self) -> crate::store::Expected {
        self.store.expect()
    }

    /// Queues `ops`; they are stored in the order queued.
    pub fn submit(&self, ops: Vec<Op>) -> Ack {
        if ops.is_empty() {
            return Ack::done();
        }
        self.store.submit(Job {
            ops,
            retention: self.retention,
        })
    }
}

/// Changes made under a cluster's lock, waiting to be queued to the store.
/// Dropped unqueued (a recorder panicked), they are queued anyway: the
/// store never lags the claims in memory.
pub struct Unqueued {
    cluster_id: Uuid,
    changes: Vec<Change>,
    persister: Persister,
    queued: bool,
}

impl Unqueued {
    pub fn new(cluster_id: Uuid, changes: Vec<Change>, persister: &Persister) -> Unqueued {
        Unqueued {
            cluster_id,
            changes,
            persister: persister.clone(),
            queued: false,
        }
    }

    /// Some claim ended (expired, released, covered).
    pub fn resolves_a_claim(&self) -> bool {
        self.changes
            .iter()
            .any(|c| matches!(c, Change::ClaimDeleted { .. }))
    }

    /// Queues the changes and the log entry, in one batch, behind every
    /// change queued before (the caller still holds the lock).
    pub fn queue(mut self, logged: Option<LoggedDecision>) -> Ack {
        self.submit(logged)
    }

    fn submit(&mut self, logged: Option<LoggedDecision>) -> Ack {
        self.queued = true;
        let mut ops = Vec::with_capacity(2);
        if !self.changes.is_empty() {
            ops.push(Op::Changes {
                cluster_id: self.cluster_id,
                changes: std::mem::take(&mut self.changes),
            });
        }
        ops.extend(logged.map(Op::Decision));
        self.persister.submit(ops)
    }
}

impl Drop for Unqueued {
    fn drop(&mut self) {
        if !self.queued {
            // Nobody waits for this acknowledgement; a failed write is
            // logged by the writer.
            drop(self.submit(None));
        }
    }
}

/// One queued submission.
struct Job {
    ops: Vec<Op>,
    retention: Retention,
}

impl Rows for Job {
    fn clusters(&self) -> Vec<Uuid> {
        self.ops
            .iter()
            .filter_map(|op| match op {
                Op::Changes { cluster_id, .. } => Some(*cluster_id),
                Op::Decision(_) => None,
            })
            .collect()
    }

    fn add_to(&self, batch: &mut Batch) -> Result<(), StoreError> {
        for op in &self.ops {
            match op {
                Op::Changes {
                    cluster_id,
                    changes,
                } => {
                    for change in changes {
                        add_change(batch, *cluster_id, change)?;
                    }
                }
                Op::Decision(decision) => batch.log_decision(decision.clone(), self.retention),
            }
        }
        Ok(())
    }
}

/// The rows one change writes.
fn add_change(batch: &mut Batch, cluster_id: Uuid, change: &Change) -> Result<(), StoreError> {
    match change {
        Change::Snapshot { records, .. } => {
            batch.replace_hosts(cluster_id);
            for record in records {
                put_host(batch, cluster_id, record)?;
            }
        }
        Change::Host(record) => put_host(batch, cluster_id, record)?,
        Change::HostRemoved {
            host_id,
            generation,
        } => batch.remove_host(cluster_id, host_id, *generation),
        Change::Generations {
            generation,
            snapshot_generation,
        } => batch.set_generations(cluster_id, *generation, *snapshot_generation),
        Change::ClaimPut(claim) => batch.put_claim(cluster_id, claim_row(claim)?),
        Change::ClaimDeleted { vm_id } => batch.delete_claim(cluster_id, vm_id),
    }
    Ok(())
}

fn put_host(batch: &mut Batch, cluster_id: Uuid, record: &HostRecord) -> Result<(), StoreError> {
    batch.put_host(
        cluster_id,
        &record.host.id,
        record.generation,
        to_json(record)?,
    );
    Ok(())
}

fn claim_row(claim: &Claim) -> Result<ClaimRow, StoreError> {
    Ok(ClaimRow {
        vm_id: claim.vm_id.clone(),
        host_id: claim.host_id.clone(),
        resources: to_json(&StoredResources {
            resources: claim.resources,
            hardware: claim.hardware.clone(),
        })?,
        decision_id: claim.decision_id,
        created_at_ms: claim.created_at.0,
        expires_at_ms: claim.expires_at.0,
        covered_from: match claim.state {
            ClaimState::Pending => None,
            ClaimState::Confirmed { covered_from } => Some(covered_from),
        },
    })
}

/// A claim's `resources` column: its resources and, for a VM with
/// hardware needs, the hardware it took. One JSON text, so claims with
/// hardware need no new column, and rows written before hardware existed
/// (resources only) read as claims of no hardware.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredResources {
    #[serde(flatten)]
    resources: Resources,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hardware: Option<std::sync::Arc<crate::hardware::claim::HardwareClaim>>,
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("encoding: {e}")))
}

/// Loads a cluster's stored placement state; an empty state when nothing
/// was stored.
pub async fn load(store: &Store, cluster_id: Uuid) -> Result<ClusterState, StoreError> {
    let mut conn = store.read().await?;
    let stored = conn.inventory(cluster_id).await?;
    let rows = conn.claims(cluster_id).await?;
    drop(conn);
    let records = stored
        .records
        .iter()
        .map(|json| {
            serde_json::from_str::<HostRecord>(json).map_err(|e| {
                StoreError::Corrupt(format!("inventory host of cluster {cluster_id}: {e}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let removed: HashMap<String, u64> = stored.removed.into_iter().collect();
    let hosts = HostInventory::restore(
        stored.generation,
        stored.snapshot_generation,
        records,
        removed,
    );
    let mut claims = Vec::with_capacity(rows.len());
    for row in rows {
        let StoredResources {
            resources,
            hardware,
        } = serde_json::from_str(&row.resources)
            .map_err(|e| StoreError::Corrupt(format!("claim of VM {}: {e}", row.vm_id)))?;
        claims.push(Claim {
            vm_id: row.vm_id,
            host_id: row.host_id,
            resources,
            decision_id: row.decision_id,
            created_at: Timestamp(row.created_at_ms),
            expires_at: Timestamp(row.expires_at_ms),
            state: match row.covered_from {
                None => ClaimState::Pending,
                Some(covered_from) => ClaimState::Confirmed { covered_from },
            },
            hardware,
        });
    }
    Ok(ClusterState::restore(hosts, claims))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::hardware::claim::{CellClaim, DeviceClaim, HardwareClaim};
    use crate::placement::hosts::HostUpdate;
    use crate::placement::test_store::{backends, store_with_cluster};
    use crate::snapshot::{Host, Snapshot};

    fn host(id: &str) -> Host {
        Host {
            id: id.to_owned(),
            metrics: [("memory_free_mib".to_owned(), 1024.0)].into(),
            ..Host::default()
        }
    }

    fn claim(vm: &str, host: &str) -> Claim {
        Claim {
            vm_id: vm.to_owned(),
            host_id: host.to_owned(),
            resources: Resources {
                memory_mib: 512.0,
                vms: 1.0,
                ..Resources::default()
            },
            decision_id: Uuid::new_v4(),
            created_at: Timestamp(10),
            expires_at: Timestamp(20),
            state: ClaimState::Pending,
            hardware: None,
        }
    }

    #[tokio::test]
    async fn what_is_written_in_batches_loads_back_the_same() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let persister = Persister::start(
                store.clone(),
                Retention {
                    count: 10,
                    max_age: Duration::from_secs(3600),
                },
            );

            let mut state = ClusterState::new();
            let mut changes = state
                .replace_snapshot(
                    3,
                    Snapshot {
                        hosts: vec![host("c"), host("a"), host("b")],
                        vms: Vec::new(),
                    },
                )
                .expect("snapshot");
            let updates = vec![
                HostUpdate::Upsert {
                    generation: 4,
                    host: host("d"),
                    vms: None,
                },
                HostUpdate::Remove {
                    generation: 5,
                    host_id: "a".to_owned(),
                },
            ];
            changes.extend(state.apply_updates(updates).expect("valid").1);
            for (vm, h) in [("v1", "c"), ("v2", "b"), ("v3", "d")] {
                let mut c = claim(vm, h);
                if vm == "v1" {
                    // The specific hardware a claim took is stored with it.
                    c.hardware = Some(std::sync::Arc::new(HardwareClaim {
                        cells: vec![CellClaim {
                            node: 1,
                            pinning: vec![[0, 6]],
                            cpus: vec![6, 7],
                            memory_mib: 512.0,
                            page_size_kib: Some(2048),
                            pages: 256,
                            ..CellClaim::default()
                        }],
                        devices: vec![DeviceClaim {
                            address: "0000:3b:00.0".to_owned(),
                            vendor_id: "10de".to_owned(),
                            product_id: "1eb8".to_owned(),
                            count: 1,
                            ..DeviceClaim::default()
                        }],
                        ..HardwareClaim::default()
                    }));
                }
                state.claims.insert(c.clone());
                changes.push(Change::ClaimPut(c));
            }
            changes.extend(state.confirm("v2", Some(9)).expect("claimed").1);
            changes.extend(state.release("v3").expect("claimed").1);
            // Half in one job, half in another: both land, in order.
            let later = changes.split_off(changes.len() / 2);
            let first = persister.submit(vec![Op::Changes {
                cluster_id: cluster,
                changes,
            }]);
            let second = persister.submit(vec![Op::Changes {
                cluster_id: cluster,
                changes: later,
            }]);
            first.wait().await.expect("stored");
            second.wait().await.expect("stored");

            let loaded = load(&store, cluster).await.expect("loads");
            let ids: Vec<&str> = loaded
                .hosts()
                .records()
                .iter()
                .map(|r| r.host.id.as_str())
                .collect();
            assert_eq!(ids, ["c", "b", "d"]);
            assert_eq!(loaded.hosts().generation(), 5);
            assert_eq!(loaded.hosts().snapshot_generation(), 3);
            assert_eq!(loaded.hosts().removed().get("a"), Some(&5));
            assert_eq!(loaded.claims().len(), 2);
            assert_eq!(
                loaded.claims().get("v2").map(|c| c.state),
                Some(ClaimState::Confirmed { covered_from: 9 })
            );
            assert_eq!(loaded.claims().get("v1"), state.claims().get("v1"));
            assert!(
                loaded
                    .claims()
                    .get("v1")
                    .is_some_and(|c| c.hardware.is_some())
            );
        }
    }

    #[tokio::test]
    async fn a_failing_job_fails_alone_not_the_batch_it_shared() {
        for db in backends().await {
            let (store, cluster) = store_with_cluster(&db).await;
            let persister = Persister::start(
                store.clone(),
                Retention {
                    count: 10,
                    max_age: Duration::from_secs(3600),
                },
            );
            // Queued before the writer runs (one-threaded runtime), so the
            // three jobs are one batch; the middle one names a cluster that no
            // longer exists, which the foreign key refuses.
            let ops = |cluster_id: Uuid, vm: &str| {
                vec![Op::Changes {
                    cluster_id,
                    changes: vec![Change::ClaimPut(claim(vm, "h"))],
                }]
            };
            let before = persister.submit(ops(cluster, "v1"));
            let deleted = persister.submit(ops(Uuid::new_v4(), "v2"));
            let after = persister.submit(ops(cluster, "v3"));
            before.wait().await.expect("stored");
            assert!(deleted.wait().await.is_err(), "a deleted cluster's claim");
            after.wait().await.expect("stored");

            let loaded = load(&store, cluster).await.expect("loads");
            let mut vms: Vec<&str> = loaded.claims().iter().map(|c| c.vm_id.as_str()).collect();
            vms.sort();
            assert_eq!(vms, ["v1", "v3"]);
        }
    }
}
