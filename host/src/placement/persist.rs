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

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// Bytes of decision rows kept per cluster, newest first.
    pub max_bytes: u64,
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

/// How often a cluster's decisions log is trimmed to its retention, at
/// most: trimming walks the newest `count` rows, so doing it for every
/// batch at thousands of decisions a second would cost more than the
/// inserts. The log may exceed its count by one second's decisions.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(1);

/// Rows per multi-row statement: one statement per kind of row per batch
/// instead of one per row (each is a round trip to SQLite's thread), while
/// staying far under SQLite's 32,766-variable limit.
const ROWS_PER_STATEMENT: usize = 200;

async fn write_loop(store: Store, retention: Retention, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH_JOBS);
    let mut trimmed: HashMap<Uuid, std::time::Instant> = HashMap::new();
    while jobs.recv_many(&mut batch, MAX_BATCH_JOBS).await > 0 {
        let result = write_batch(&store, retention, &batch, &mut trimmed).await;
        match result {
            Ok(()) => {
                for job in batch.drain(..) {
                    let _ = job.done.send(Ok(()));
                }
            }
            // One job's failure (say, a claim for a cluster deleted while
            // its decision ran) must not fail the requests of other
            // clusters that shared its transaction: the batch rolled back
            // as a whole, so each job is applied again on its own.
            Err(e) if batch.len() > 1 => {
                tracing::warn!(error = %e, jobs = batch.len(), "batch not stored; storing its jobs one by one");
                for job in batch.drain(..) {
                    let alone = std::slice::from_ref(&job);
                    let result = write_batch(&store, retention, alone, &mut trimmed)
                        .await
                        .map_err(|e| PersistError(e.to_string()));
                    if let Err(e) = &result {
                        tracing::error!(error = %e, "placement state not stored");
                    }
                    let _ = job.done.send(result);
                }
            }
            Err(e) => {
                let e = PersistError(e.to_string());
                tracing::error!(error = %e, "placement state not stored");
                for job in batch.drain(..) {
                    let _ = job.done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// What becomes of one host in a batch.
enum HostWrite<'a> {
    Put(&'a HostRecord),
    Removed(u64),
}

/// A batch's changes to one cluster, reduced to their final effect: a row
/// changed several times in one transaction is written once, as it ends.
#[derive(Default)]
struct ClusterWrites<'a> {
    /// A snapshot replaced every host: the stored ones go first.
    replaced: bool,
    /// In first-seen order, which is snapshot order for a snapshot's hosts
    /// (row order is host order after a restart).
    hosts: Vec<(&'a str, HostWrite<'a>)>,
    host_index: HashMap<&'a str, usize>,
    generations: Option<(u64, u64)>,
    /// `None`: the claim is gone.
    claims: BTreeMap<&'a str, Option<&'a Claim>>,
}

impl<'a> ClusterWrites<'a> {
    fn host(&mut self, id: &'a str, write: HostWrite<'a>) {
        match self.host_index.get(id) {
            Some(&i) => self.hosts[i].1 = write,
            None => {
                self.host_index.insert(id, self.hosts.len());
                self.hosts.push((id, write));
            }
        }
    }

    fn add(&mut self, change: &'a Change) {
        match change {
            Change::Snapshot { records, .. } => {
                self.replaced = true;
                self.hosts.clear();
                self.host_index.clear();
                for record in records {
                    self.host(&record.host.id, HostWrite::Put(record));
                }
            }
            Change::Host(record) => self.host(&record.host.id, HostWrite::Put(record)),
            Change::HostRemoved {
                host_id,
                generation,
            } => self.host(host_id, HostWrite::Removed(*generation)),
            Change::Generations {
                generation,
                snapshot_generation,
            } => self.generations = Some((*generation, *snapshot_generation)),
            Change::ClaimPut(claim) => {
                self.claims.insert(&claim.vm_id, Some(claim));
            }
            Change::ClaimDeleted { vm_id } => {
                self.claims.insert(vm_id, None);
            }
        }
    }
}

async fn write_batch(
    store: &Store,
    retention: Retention,
    batch: &[Job],
    trimmed: &mut HashMap<Uuid, std::time::Instant>,
) -> Result<(), StoreError> {
    let mut clusters: BTreeMap<Uuid, ClusterWrites<'_>> = BTreeMap::new();
    let mut decisions: Vec<&LoggedDecision> = Vec::new();
    for op in batch.iter().flat_map(|j| &j.ops) {
        match op {
            Op::Changes {
                cluster_id,
                changes,
            } => {
                let writes = clusters.entry(*cluster_id).or_default();
                for change in changes {
                    writes.add(change);
                }
            }
            Op::Decision(decision) => decisions.push(decision),
        }
    }
    let mut tx = store.write_reserved().await?;
    for (cluster_id, writes) in &clusters {
        write_cluster(&mut tx, *cluster_id, writes).await?;
    }
    insert_decisions(&mut tx, &decisions).await?;
    let now = std::time::Instant::now();
    let logged: BTreeSet<Uuid> = decisions.iter().map(|d| d.cluster_id).collect();
    for cluster_id in logged {
        if trimmed
            .get(&cluster_id)
            .is_none_or(|at| now.duration_since(*at) >= TRIM_INTERVAL)
        {
            trim_decisions(&mut tx, cluster_id, retention, Timestamp::now()).await?;
            trimmed.insert(cluster_id, now);
        }
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

/// `(?, ?, ...)` with `columns` placeholders, `rows` times, comma-separated.
fn placeholders(rows: usize, columns: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    vec![row; rows].join(", ")
}

async fn write_cluster(
    conn: &mut SqliteConnection,
    cluster_id: Uuid,
    writes: &ClusterWrites<'_>,
) -> Result<(), StoreError> {
    let cluster = cluster_id.to_string();
    if writes.replaced {
        for table in ["inventory_hosts", "inventory_removed"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE cluster_id = ?"
            )))
            .bind(&cluster)
            .execute(&mut *conn)
            .await?;
        }
    }
    let puts: Vec<&HostRecord> = writes
        .hosts
        .iter()
        .filter_map(|(_, w)| match w {
            HostWrite::Put(record) => Some(*record),
            HostWrite::Removed(_) => None,
        })
        .collect();
    for chunk in puts.chunks(ROWS_PER_STATEMENT) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO inventory_hosts (cluster_id, host_id, generation, record) VALUES {} \
             ON CONFLICT (cluster_id, host_id) \
             DO UPDATE SET generation = excluded.generation, record = excluded.record",
            placeholders(chunk.len(), 4)
        )));
        for record in chunk {
            query = query
                .bind(&cluster)
                .bind(&record.host.id)
                .bind(generation(record.generation)?)
                .bind(to_json(record)?);
        }
        query.execute(&mut *conn).await?;
        if !writes.replaced {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM inventory_removed WHERE cluster_id = ? AND host_id IN ({})",
                vec!["?"; chunk.len()].join(", ")
            )))
            .bind(&cluster);
            for record in chunk {
                query = query.bind(&record.host.id);
            }
            query.execute(&mut *conn).await?;
        }
    }
    let removed: Vec<(&str, u64)> = writes
        .hosts
        .iter()
        .filter_map(|(id, w)| match w {
            HostWrite::Removed(generation) => Some((*id, *generation)),
            HostWrite::Put(_) => None,
        })
        .collect();
    for chunk in removed.chunks(ROWS_PER_STATEMENT) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM inventory_hosts WHERE cluster_id = ? AND host_id IN ({})",
            vec!["?"; chunk.len()].join(", ")
        )))
        .bind(&cluster);
        for (id, _) in chunk {
            query = query.bind(*id);
        }
        query.execute(&mut *conn).await?;
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO inventory_removed (cluster_id, host_id, generation) VALUES {} \
             ON CONFLICT (cluster_id, host_id) DO UPDATE SET generation = excluded.generation",
            placeholders(chunk.len(), 3)
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
             VALUES (?, ?, ?) ON CONFLICT (cluster_id) DO UPDATE SET \
             generation = excluded.generation, snapshot_generation = excluded.snapshot_generation",
        )
        .bind(&cluster)
        .bind(generation(held)?)
        .bind(generation(snapshot_generation)?)
        .execute(&mut *conn)
        .await?;
    }
    let gone: Vec<&str> = writes
        .claims
        .iter()
        .filter(|(_, c)| c.is_none())
        .map(|(vm, _)| *vm)
        .collect();
    for chunk in gone.chunks(ROWS_PER_STATEMENT) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM claims WHERE cluster_id = ? AND vm_id IN ({})",
            vec!["?"; chunk.len()].join(", ")
        )))
        .bind(&cluster);
        for vm in chunk {
            query = query.bind(*vm);
        }
        query.execute(&mut *conn).await?;
    }
    let put: Vec<&Claim> = writes.claims.values().filter_map(|c| *c).collect();
    for chunk in put.chunks(ROWS_PER_STATEMENT) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO claims (cluster_id, vm_id, host_id, resources, decision_id, \
             created_at_ms, expires_at_ms, covered_from) VALUES {} \
             ON CONFLICT (cluster_id, vm_id) DO UPDATE SET host_id = excluded.host_id, \
             resources = excluded.resources, decision_id = excluded.decision_id, \
             created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms, \
             covered_from = excluded.covered_from",
            placeholders(chunk.len(), 8)
        )));
        for claim in chunk {
            let covered_from = match claim.state {
                ClaimState::Pending => None,
                ClaimState::Confirmed { covered_from } => Some(generation(covered_from)?),
            };
            query = query
                .bind(&cluster)
                .bind(&claim.vm_id)
                .bind(&claim.host_id)
                .bind(to_json(&claim.resources)?)
                .bind(claim.decision_id.to_string())
                .bind(millis(claim.created_at))
                .bind(millis(claim.expires_at))
                .bind(covered_from);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

async fn insert_decisions(
    conn: &mut SqliteConnection,
    decisions: &[&LoggedDecision],
) -> Result<(), StoreError> {
    for chunk in decisions.chunks(ROWS_PER_STATEMENT) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO decisions (id, cluster_id, kind, vm_id, host_id, answer, size_bytes) \
             VALUES {}",
            placeholders(chunk.len(), 7)
        )));
        for decision in chunk {
            let row = crate::store::decisions::bounded_row(
                decision.id,
                decision.vm_id.as_deref(),
                decision.host_id.as_deref(),
                &decision.answer,
            );
            query = query
                .bind(decision.id.to_string())
                .bind(decision.cluster_id.to_string())
                .bind(decision.kind.name())
                .bind(row.vm_id.map(str::to_owned))
                .bind(row.host_id.map(str::to_owned))
                .bind(row.answer.into_owned())
                .bind(row.size_bytes);
        }
        query.execute(&mut *conn).await?;
    }
    let claims: Vec<(Uuid, &str, &str)> = decisions
        .iter()
        .flat_map(|d| {
            d.claims
                .iter()
                .map(move |(vm, host)| (d.id, vm.as_str(), host.as_str()))
        })
        .collect();
    for chunk in claims.chunks(ROWS_PER_STATEMENT) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO decision_claims (decision_id, vm_id, host_id) VALUES {}",
            placeholders(chunk.len(), 3)
        )));
        for (id, vm, host) in chunk {
            query = query.bind(id.to_string()).bind(*vm).bind(*host);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Forgets a cluster's decisions beyond the newest `retention.count`,
/// beyond its newest `retention.max_bytes`, and those older than
/// `retention.max_age`.
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
    crate::store::decisions::trim_bytes(conn, cluster_id, retention.max_bytes).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::hosts::HostUpdate;
    use crate::placement::test_store::store_with_cluster;
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
        }
    }

    #[tokio::test]
    async fn what_is_written_in_batches_loads_back_the_same() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, cluster) = store_with_cluster(dir.path()).await;
        let persister = Persister::start(
            store.clone(),
            Retention {
                count: 10,
                max_age: Duration::from_secs(3600),
                max_bytes: u64::MAX,
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
            let c = claim(vm, h);
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

        let mut conn = store.read().await.expect("read");
        let loaded = load(&mut conn, cluster).await.expect("loads");
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
    }

    #[tokio::test]
    async fn a_failing_job_fails_alone_not_the_batch_it_shared() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, cluster) = store_with_cluster(dir.path()).await;
        let persister = Persister::start(
            store.clone(),
            Retention {
                count: 10,
                max_age: Duration::from_secs(3600),
                max_bytes: u64::MAX,
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

        let mut conn = store.read().await.expect("read");
        let loaded = load(&mut conn, cluster).await.expect("loads");
        let mut vms: Vec<&str> = loaded.claims().iter().map(|c| c.vm_id.as_str()).collect();
        vms.sort();
        assert_eq!(vms, ["v1", "v3"]);
    }

    #[tokio::test]
    async fn decisions_are_logged_with_their_claims_and_trimmed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, cluster) = store_with_cluster(dir.path()).await;
        let retention = Retention {
            count: 3,
            max_age: Duration::from_secs(3600),
            max_bytes: u64::MAX,
        };
        let persister = Persister::start(store.clone(), retention);
        let mut acks = Vec::new();
        for i in 0..5 {
            acks.push(persister.submit(vec![Op::Decision(LoggedDecision {
                id: Uuid::new_v4(),
                cluster_id: cluster,
                kind: DecisionKind::Schedule,
                vm_id: Some(format!("vm{i}")),
                host_id: Some("h".to_owned()),
                answer: "{}".to_owned(),
                claims: vec![
                    (format!("vm{i}-0"), "h".to_owned()),
                    (format!("vm{i}-1"), "h".to_owned()),
                ],
            })]));
        }
        for ack in acks {
            ack.wait().await.expect("stored");
        }
        let mut conn = store.read().await.expect("read");
        let claims: (i64,) = sqlx::query_as("SELECT count(*) FROM decision_claims")
            .fetch_one(&mut *conn)
            .await
            .expect("count");
        assert!(claims.0 >= 6, "{claims:?}");
        trim_decisions(&mut conn, cluster, retention, Timestamp::now())
            .await
            .expect("trims");
        let kept: Vec<(String,)> = sqlx::query_as("SELECT vm_id FROM decisions ORDER BY rowid")
            .fetch_all(&mut *conn)
            .await
            .expect("rows");
        let kept: Vec<&str> = kept.iter().map(|(v,)| v.as_str()).collect();
        assert_eq!(kept, ["vm2", "vm3", "vm4"]);
        let claims: (i64,) = sqlx::query_as("SELECT count(*) FROM decision_claims")
            .fetch_one(&mut *conn)
            .await
            .expect("count");
        assert_eq!(claims.0, 6, "claims go with their decisions");
        // Age: everything is younger than an hour, nothing older than 0 s
        // survives.
        let none = Retention {
            count: 10,
            max_age: Duration::ZERO,
            max_bytes: u64::MAX,
        };
        trim_decisions(
            &mut conn,
            cluster,
            none,
            Timestamp::now().after(Duration::from_secs(1)),
        )
        .await
        .expect("trims");
        let left: (i64,) = sqlx::query_as("SELECT count(*) FROM decisions")
            .fetch_one(&mut *conn)
            .await
            .expect("count");
        assert_eq!(left.0, 0);
    }

    #[tokio::test]
    async fn decisions_are_bounded_per_row_and_trimmed_to_their_byte_budget() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, cluster) = store_with_cluster(dir.path()).await;
        let retention = Retention {
            count: 100,
            max_age: Duration::from_secs(3600),
            max_bytes: u64::MAX,
        };
        let persister = Persister::start(store.clone(), retention);
        let decision = |vm: String, answer: String| LoggedDecision {
            id: Uuid::new_v4(),
            cluster_id: cluster,
            kind: DecisionKind::Schedule,
            vm_id: Some(vm),
            host_id: Some("h".to_owned()),
            answer,
            claims: Vec::new(),
        };
        // 100-byte answers: each row counts 104 bytes with its ids.
        let padded = format!("{{\"pad\":\"{}\"}}", "x".repeat(90));
        assert_eq!(padded.len(), 100);
        for i in 0..5 {
            persister
                .submit(vec![Op::Decision(decision(
                    format!("vm{i}"),
                    padded.clone(),
                ))])
                .wait()
                .await
                .expect("stored");
        }
        // A huge answer and id are cut to the row's bounds.
        let huge = decision(
            "v".repeat(1 << 20),
            format!("{{\"pad\":\"{}\"}}", "x".repeat(1 << 20)),
        );
        let huge_id = huge.id;
        persister
            .submit(vec![Op::Decision(huge)])
            .wait()
            .await
            .expect("stored");
        let mut conn = store.read().await.expect("read");
        let (vm, answer, size): (String, String, i64) =
            sqlx::query_as("SELECT vm_id, answer, size_bytes FROM decisions WHERE id = ?")
                .bind(huge_id.to_string())
                .fetch_one(&mut *conn)
                .await
                .expect("row");
        assert_eq!(vm.len(), crate::store::decisions::MAX_ID_COLUMN_BYTES);
        assert!(answer.len() < 1024, "{answer}");
        assert_eq!(size as usize, vm.len() + 1 + answer.len());
        sqlx::query("DELETE FROM decisions WHERE id = ?")
            .bind(huge_id.to_string())
            .execute(&mut *conn)
            .await
            .expect("deleted");

        // 250 bytes keep the newest two rows (208 bytes), not three (312).
        let budget = Retention {
            max_bytes: 250,
            ..retention
        };
        trim_decisions(&mut conn, cluster, budget, Timestamp::now())
            .await
            .expect("trims");
        let kept: Vec<(String,)> = sqlx::query_as("SELECT vm_id FROM decisions ORDER BY rowid")
            .fetch_all(&mut *conn)
            .await
            .expect("rows");
        let kept: Vec<&str> = kept.iter().map(|(v,)| v.as_str()).collect();
        assert_eq!(kept, ["vm3", "vm4"]);
    }
}
