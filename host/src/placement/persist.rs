//! Keeping placement state across restarts: the SQL behind the inventory,
//! claims and decision-log tables (migration `0002_placement.sql`), and
//! the one writer that applies changes in batches.
//!
//! Every operation changes the in-memory state under its cluster's lock
//! and, still under the lock, queues the resulting [`Change`]s here, so the
//! queue holds them in the order they happened. The writer takes whatever
//! is queued (up to [`MAX_BATCH_JOBS`] jobs), applies it in one SQLite
//! transaction and then acknowledges each job. A request answers only once
//! its job is acknowledged, so a claim the engine was told about is on disk
//! (group commit: at thousands of decisions a second, one transaction per
//! decision would make the single SQLite writer the bottleneck).
//!
//! If a transaction fails, the jobs in it get the error and their requests
//! answer 500; the in-memory state keeps the change, which for a claim is
//! the safe direction (capacity held, not double-booked) until the claim
//! expires or the server restarts from what was stored.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::claims::{Claim, ClaimState};
use super::cluster::{Change, ClusterState};
use super::hosts::{HostInventory, HostRecord};
use super::resources::Resources;
use super::time::Timestamp;
use crate::store::decisions::DecisionKind;
use crate::store::{SqliteConnection, Store, StoreError, parse_id};

/// Most queued jobs applied in one transaction. Large enough to absorb a
/// burst of decisions in one commit, small enough that one transaction
/// holds SQLite's write lock for milliseconds, not seconds.
pub const MAX_BATCH_JOBS: usize = 256;

/// Hosts inserted per statement when storing a full snapshot: 4 values
/// each keeps a statement well under SQLite's 32,766-variable limit while
/// cutting 10,000 round trips to 20.
const HOSTS_PER_INSERT: usize = 500;

/// A decision for the log, with the claims it made.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedDecision {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub kind: DecisionKind,
    pub vm_id: Option<String>,
    pub host_id: Option<String>,
    /// The answer as returned, with a bounded explain record.
    pub answer: String,
    /// (VM, host) of every claim the decision made.
    pub claims: Vec<(String, String)>,
}

/// Something to store.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Changes {
        cluster_id: Uuid,
        changes: Vec<Change>,
    },
    Decision(LoggedDecision),
}

/// How long decisions are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Decisions kept per cluster, newest first.
    pub count: u32,
    /// Decisions older than this are forgotten.
    pub max_age: Duration,
}

/// A failed write, as the requests waiting on it see it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("storing placement state failed: {0}")]
pub struct PersistError(pub String);

struct Job {
    ops: Vec<Op>,
    done: oneshot::Sender<Result<(), PersistError>>,
}

/// The queue to the writer. Cloning shares the queue.
#[derive(Clone, Debug)]
pub struct Persister {
    queue: mpsc::UnboundedSender<Job>,
}

/// A job's acknowledgement, to await outside the cluster's lock.
pub struct Ack(oneshot::Receiver<Result<(), PersistError>>);

impl Ack {
    pub async fn wait(self) -> Result<(), PersistError> {
        self.0
            .await
            .unwrap_or_else(|_| Err(PersistError("the writer stopped".to_owned())))
    }
}

impl Persister {
    /// Starts the writer on the current tokio runtime. It stops when every
    /// `Persister` is dropped and the queue is drained.
    pub fn start(store: Store, retention: Retention) -> Persister {
        let (queue, jobs) = mpsc::unbounded_channel();
        tokio::spawn(write_loop(store, retention, jobs));
        Persister { queue }
    }

    /// Queues `ops`; they are stored in the order queued.
    pub fn submit(&self, ops: Vec<Op>) -> Ack {
        let (done, ack) = oneshot::channel();
        if ops.is_empty() {
            let _ = done.send(Ok(()));
        } else if let Err(mpsc::error::SendError(job)) = self.queue.send(Job { ops, done }) {
            let _ = job
                .done
                .send(Err(PersistError("the writer stopped".to_owned())));
        }
        Ack(ack)
    }
}

async fn write_loop(store: Store, retention: Retention, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH_JOBS);
    while jobs.recv_many(&mut batch, MAX_BATCH_JOBS).await > 0 {
        let result = write_batch(&store, retention, &batch)
            .await
            .map_err(|e| PersistError(e.to_string()));
        if let Err(e) = &result {
            tracing::error!(error = %e, jobs = batch.len(), "placement state not stored");
        }
        for job in batch.drain(..) {
            let _ = job.done.send(result.clone());
        }
    }
}

async fn write_batch(store: &Store, retention: Retention, batch: &[Job]) -> Result<(), StoreError> {
    let mut tx = store.write().await?;
    let mut logged_clusters = BTreeSet::new();
    for op in batch.iter().flat_map(|j| &j.ops) {
        match op {
            Op::Changes {
                cluster_id,
                changes,
            } => {
                for change in changes {
                    apply_change(&mut tx, *cluster_id, change).await?;
                }
            }
            Op::Decision(decision) => {
                insert_decision(&mut tx, decision).await?;
                logged_clusters.insert(decision.cluster_id);
            }
        }
    }
    for cluster_id in logged_clusters {
        trim_decisions(&mut tx, cluster_id, retention, Timestamp::now()).await?;
    }
    tx.commit().await
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("encoding: {e}")))
}

fn generation(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Corrupt(format!("generation {value} too large")))
}

fn millis(value: Timestamp) -> i64 {
    i64::try_from(value.0).unwrap_or(i64::MAX)
}

async fn apply_change(
    conn: &mut SqliteConnection,
    cluster_id: Uuid,
    change: &Change,
) -> Result<(), StoreError> {
    let cluster = cluster_id.to_string();
    match change {
        Change::Snapshot { records, .. } => {
            sqlx::query("DELETE FROM inventory_hosts WHERE cluster_id = ?")
                .bind(&cluster)
                .execute(&mut *conn)
                .await?;
            sqlx::query("DELETE FROM inventory_removed WHERE cluster_id = ?")
                .bind(&cluster)
                .execute(&mut *conn)
                .await?;
            for chunk in records.chunks(HOSTS_PER_INSERT) {
                let mut sql = String::from(
                    "INSERT INTO inventory_hosts (cluster_id, host_id, generation, record) VALUES ",
                );
                for i in 0..chunk.len() {
                    sql.push_str(if i == 0 {
                        "(?, ?, ?, ?)"
                    } else {
                        ", (?, ?, ?, ?)"
                    });
                }
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for record in chunk {
                    query = query
                        .bind(&cluster)
                        .bind(&record.host.id)
                        .bind(generation(record.generation)?)
                        .bind(to_json(record)?);
                }
                query.execute(&mut *conn).await?;
            }
        }
        Change::Host(record) => {
            sqlx::query(
                "INSERT INTO inventory_hosts (cluster_id, host_id, generation, record) \
                 VALUES (?, ?, ?, ?) ON CONFLICT (cluster_id, host_id) \
                 DO UPDATE SET generation = excluded.generation, record = excluded.record",
            )
            .bind(&cluster)
            .bind(&record.host.id)
            .bind(generation(record.generation)?)
            .bind(to_json(record)?)
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM inventory_removed WHERE cluster_id = ? AND host_id = ?")
                .bind(&cluster)
                .bind(&record.host.id)
                .execute(&mut *conn)
                .await?;
        }
        Change::HostRemoved {
            host_id,
            generation: removed_at,
        } => {
            sqlx::query("DELETE FROM inventory_hosts WHERE cluster_id = ? AND host_id = ?")
                .bind(&cluster)
                .bind(host_id)
                .execute(&mut *conn)
                .await?;
            sqlx::query(
                "INSERT INTO inventory_removed (cluster_id, host_id, generation) VALUES (?, ?, ?) \
                 ON CONFLICT (cluster_id, host_id) DO UPDATE SET generation = excluded.generation",
            )
            .bind(&cluster)
            .bind(host_id)
            .bind(generation(*removed_at)?)
            .execute(&mut *conn)
            .await?;
        }
        Change::Generations {
            generation: held,
            snapshot_generation,
        } => {
            sqlx::query(
                "INSERT INTO inventory_clusters (cluster_id, generation, snapshot_generation) \
                 VALUES (?, ?, ?) ON CONFLICT (cluster_id) DO UPDATE SET \
                 generation = excluded.generation, snapshot_generation = excluded.snapshot_generation",
            )
            .bind(&cluster)
            .bind(generation(*held)?)
            .bind(generation(*snapshot_generation)?)
            .execute(&mut *conn)
            .await?;
        }
        Change::ClaimPut(claim) => {
            let covered_from = match claim.state {
                ClaimState::Pending => None,
                ClaimState::Confirmed { covered_from } => Some(generation(covered_from)?),
            };
            sqlx::query(
                "INSERT INTO claims (cluster_id, vm_id, host_id, resources, decision_id, \
                 created_at_ms, expires_at_ms, covered_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (cluster_id, vm_id) DO UPDATE SET host_id = excluded.host_id, \
                 resources = excluded.resources, decision_id = excluded.decision_id, \
                 created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms, \
                 covered_from = excluded.covered_from",
            )
            .bind(&cluster)
            .bind(&claim.vm_id)
            .bind(&claim.host_id)
            .bind(to_json(&claim.resources)?)
            .bind(claim.decision_id.to_string())
            .bind(millis(claim.created_at))
            .bind(millis(claim.expires_at))
            .bind(covered_from)
            .execute(&mut *conn)
            .await?;
        }
        Change::ClaimDeleted { vm_id } => {
            sqlx::query("DELETE FROM claims WHERE cluster_id = ? AND vm_id = ?")
                .bind(&cluster)
                .bind(vm_id)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

async fn insert_decision(
    conn: &mut SqliteConnection,
    decision: &LoggedDecision,
) -> Result<(), StoreError> {
    let id = decision.id.to_string();
    sqlx::query(
        "INSERT INTO decisions (id, cluster_id, kind, vm_id, host_id, answer) \
         VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(&id)
    .bind(decision.cluster_id.to_string())
    .bind(decision.kind.name())
    .bind(&decision.vm_id)
    .bind(&decision.host_id)
    .bind(&decision.answer)
    .execute(&mut *conn)
    .await?;
    for (vm_id, host_id) in &decision.claims {
        sqlx::query("INSERT INTO decision_claims (decision_id, vm_id, host_id) VALUES (?, ?, ?)")
            .bind(&id)
            .bind(vm_id)
            .bind(host_id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Forgets a cluster's decisions beyond the newest `retention.count` and
/// those older than `retention.max_age`.
pub async fn trim_decisions(
    conn: &mut SqliteConnection,
    cluster_id: Uuid,
    retention: Retention,
    now: Timestamp,
) -> Result<(), StoreError> {
    let cluster = cluster_id.to_string();
    let cutoff = Timestamp(
        now.0
            .saturating_sub(u64::try_from(retention.max_age.as_millis()).unwrap_or(u64::MAX)),
    )
    .to_rfc3339();
    sqlx::query("DELETE FROM decisions WHERE cluster_id = ? AND created_at < ?")
        .bind(&cluster)
        .bind(cutoff)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "DELETE FROM decisions WHERE cluster_id = ?1 AND rowid <= ( \
             SELECT rowid FROM decisions WHERE cluster_id = ?1 \
             ORDER BY rowid DESC LIMIT 1 OFFSET ?2)",
    )
    .bind(&cluster)
    .bind(i64::from(retention.count))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Loads a cluster's stored placement state; an empty state when nothing
/// was stored.
pub async fn load(
    conn: &mut SqliteConnection,
    cluster_id: Uuid,
) -> Result<ClusterState, StoreError> {
    let cluster = cluster_id.to_string();
    let generations: Option<(i64, i64)> = sqlx::query_as(
        "SELECT generation, snapshot_generation FROM inventory_clusters WHERE cluster_id = ?",
    )
    .bind(&cluster)
    .fetch_optional(&mut *conn)
    .await?;
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT record FROM inventory_hosts WHERE cluster_id = ? ORDER BY rowid")
            .bind(&cluster)
            .fetch_all(&mut *conn)
            .await?;
    let records = rows
        .iter()
        .map(|(json,)| {
            serde_json::from_str::<HostRecord>(json).map_err(|e| {
                StoreError::Corrupt(format!("inventory host of cluster {cluster}: {e}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let removed: Vec<(String, i64)> =
        sqlx::query_as("SELECT host_id, generation FROM inventory_removed WHERE cluster_id = ?")
            .bind(&cluster)
            .fetch_all(&mut *conn)
            .await?;
    let removed: HashMap<String, u64> = removed
        .into_iter()
        .map(|(id, g)| (id, u64::try_from(g).unwrap_or(0)))
        .collect();
    let (held, snapshot) = generations
        .map(|(g, s)| (u64::try_from(g).unwrap_or(0), u64::try_from(s).unwrap_or(0)))
        .unwrap_or((0, 0));
    let hosts = HostInventory::restore(held, snapshot, records, removed);

    type ClaimRow = (String, String, String, String, i64, i64, Option<i64>);
    let rows: Vec<ClaimRow> = sqlx::query_as(
        "SELECT vm_id, host_id, resources, decision_id, created_at_ms, expires_at_ms, \
         covered_from FROM claims WHERE cluster_id = ?",
    )
    .bind(&cluster)
    .fetch_all(&mut *conn)
    .await?;
    let mut claims = Vec::with_capacity(rows.len());
    for (vm_id, host_id, resources, decision_id, created, expires, covered) in rows {
        let resources: Resources = serde_json::from_str(&resources)
            .map_err(|e| StoreError::Corrupt(format!("claim of VM {vm_id}: {e}")))?;
        claims.push(Claim {
            vm_id,
            host_id,
            resources,
            decision_id: parse_id(&decision_id)?,
            created_at: Timestamp(u64::try_from(created).unwrap_or(0)),
            expires_at: Timestamp(u64::try_from(expires).unwrap_or(0)),
            state: match covered {
                None => ClaimState::Pending,
                Some(g) => ClaimState::Confirmed {
                    covered_from: u64::try_from(g).unwrap_or(0),
                },
            },
        });
    }
    Ok(ClusterState::restore(hosts, claims))
}
