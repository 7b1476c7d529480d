//! The one writer of the placement state (held inventories, claims) and of
//! the decisions log: callers queue jobs, and a background task applies
//! whatever is queued (up to [`MAX_BATCH_JOBS`] jobs) in one transaction,
//! then acknowledges each job.
//!
//! A request answers only once its job is acknowledged, so what the engine
//! was told is on disk (group commit: at thousands of decisions a second,
//! one transaction per decision would make the single SQLite writer the
//! bottleneck). Jobs are applied in the order queued; a caller that queues
//! under a lock (placement queues under its cluster's lock) so has its
//! changes stored in the order they happened.
//!
//! A job is anything that can say which rows it writes ([`Rows`]); the
//! writer asks it when it builds the batch, so encoding (JSON of host
//! records and claims) happens on the writer's task, not under the
//! caller's lock. Rows written several times in one batch are written once,
//! as they end ([`Batch`]).
//!
//! If a transaction fails, each of its jobs is applied again on its own,
//! so one bad job (a claim for a cluster deleted meanwhile) fails alone.
//!
//! A caller about to queue a job can say so first
//! ([`Store::expect`](super::Store::expect)): a cluster's turn does, for
//! the decision it is deciding. A batch waits for the jobs announced when
//! the writer took it, up to [`COMMIT_DELAY`], before committing
//! (PostgreSQL's `commit_delay` with `commit_siblings`). A cluster
//! decides one request at a time, so without this each commit held about
//! one decision however many were in flight, and a commit's pages (the
//! log's table and index ends, the claims' page, the byte counter) were
//! written to SQLite's log once per decision. With nothing on its way the
//! writer commits at once, so a lone request waits for nothing.
//!
//! On SQLite, the writer nudges the background checkpointer
//! (`checkpoint.rs`) after each batch instead of checkpointing in its own
//! commits.
//!
//! The decisions log's one retention rule (per cluster: count and age; the
//! whole log: a byte budget) is applied here, in the transaction that
//! logged (`retain`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use sqlx::AnyPool;
use tokio::sync::{Notify, mpsc, oneshot};
use uuid::Uuid;

#[cfg(test)]
use super::Store;
use super::checkpoint::Checkpointer;
use super::claims::{ClaimRow, ClaimWrites};
use super::decisions::{DEFAULT_LOG_MAX_BYTES, LoggedDecision, Retention};
use super::inventory::{HostWrite, InventoryWrites};
use super::{Backend, Db, LockMode, StoreError, begin};
use crate::time::Timestamp;

/// Most queued jobs applied in one transaction. Large enough to absorb a
/// burst of decisions in one commit, small enough that one transaction
/// holds SQLite's write lock for milliseconds, not seconds.
pub const MAX_BATCH_JOBS: usize = 256;

/// Longest the writer holds a batch open for a job it was told is on its
/// way ([`Store::expect`](super::Store::expect)), counted from when it
/// took the batch's first job. About two adaptive decisions of the
/// default policy on a loaded two-core machine: long enough for the
/// decision after the one queued, short beside the answer's other waits
/// (a decision's p50 over HTTP is several milliseconds with eight
/// clients).
pub const COMMIT_DELAY: Duration = Duration::from_millis(2);

/// How often a cluster's decisions log is trimmed to its retention, at
/// most, unless [`TRIM_SLACK_DIVISOR`] asks sooner: trimming walks the
/// newest `count` rows, so doing it for every batch at thousands of
/// decisions a second would cost more than the inserts.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(1);

/// A cluster's log is also trimmed once the decisions logged since its
/// last trim reach `count / TRIM_SLACK_DIVISOR` (at least one): the log
/// exceeds its count by at most an eighth, and a small log (a count of a
/// few) is trimmed at every batch, so it never shows more than its count.
/// Each trim walks about `count` rows, so this costs about eight row
/// visits per logged decision.
pub const TRIM_SLACK_DIVISOR: u32 = 8;

/// What a queued job writes. Called on the writer's task, once per attempt
/// (twice if the job's first transaction failed), so it must not consume
/// the job.
pub trait Rows: Send + Sync + 'static {
    /// Adds this job's writes to `batch`, in the order they happened.
    fn add_to(&self, batch: &mut Batch) -> Result<(), StoreError>;

    /// The clusters whose placement rows (held inventory, claims) this job
    /// writes: with several replicas, each is stamped when the job is
    /// queued with the epoch this replica then holds it under, and the job
    /// is stored only if the cluster is still held under that epoch
    /// ([`Fence`]). A job that writes placement rows of a cluster it does
    /// not name here is refused when fenced.
    fn clusters(&self) -> Vec<Uuid> {
        Vec::new()
    }
}

/// A job that writes nothing: queued by [`super::Store::flush`].
pub(super) struct Nothing;

impl Rows for Nothing {
    fn add_to(&self, _: &mut Batch) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Who may write a cluster's placement rows: with several replicas
/// (`crate::fleet`), only the cluster's owner, under the epoch it took the
/// cluster with. The writer checks it inside each batch's transaction
/// ([`Db::holds_cluster`]), so a replica that lost a cluster (its lease ran
/// out while it was paused, say) cannot store a claim made on what it held
/// in memory after another replica took over.
pub trait Fence: Send + Sync + std::fmt::Debug + 'static {
    /// This replica's id.
    fn replica_id(&self) -> &str;
    /// The epoch under which this replica holds `cluster_id`; `None`: it
    /// does not.
    fn epoch(&self, cluster_id: Uuid) -> Option<i64>;
}

/// A failed write, as the requests waiting on it see it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PersistError {
    #[error("storing placement state failed: {0}")]
    Failed(String),
    /// The database could not be reached ([`StoreError::is_unreachable`]):
    /// nothing was stored, and a retry may succeed once it is back.
    #[error("storing placement state failed, the database cannot be reached: {0}")]
    Unavailable(String),
    /// The fence refused the write ([`Fence`]): another replica owns the
    /// cluster now, and the request can be retried there.
    #[error("this replica no longer owns cluster {cluster_id}; nothing was stored")]
    NotOwner { cluster_id: Uuid },
}

impl From<StoreError> for PersistError {
    fn from(e: StoreError) -> PersistError {
        match e {
            StoreError::NotOwner { cluster_id } => PersistError::NotOwner { cluster_id },
            e if e.is_unreachable() => PersistError::Unavailable(e.to_string()),
            e => PersistError::Failed(e.to_string()),
        }
    }
}

/// A job's acknowledgement, to await outside any lock.
pub struct Ack(oneshot::Receiver<Result<(), PersistError>>);

impl Ack {
    /// An acknowledgement of a job with nothing to write.
    pub fn done() -> Ack {
        let (done, ack) = oneshot::channel();
        let _ = done.send(Ok(()));
        Ack(ack)
    }

    pub async fn wait(self) -> Result<(), PersistError> {
        self.0
            .await
            .unwrap_or_else(|_| Err(PersistError::Failed("the writer stopped".to_owned())))
    }
}

struct Job {
    rows: Box<dyn Rows>,
    /// With a fence: each cluster the job writes, with the epoch this
    /// replica held it under when the job was queued (`None`: it did not).
    epochs: Vec<(Uuid, Option<i64>)>,
    done: oneshot::Sender<Result<(), PersistError>>,
}

/// The queue to the writer. Cloning shares the queue; the writer stops
/// when every clone is dropped and the queue is drained.
#[derive(Clone, Debug)]
pub(super) struct Queue {
    jobs: mpsc::UnboundedSender<Job>,
    /// The decisions log's byte budget, read at every batch that logs.
    max_log_bytes: Arc<AtomicU64>,
    /// Set once, when the server runs as one of several replicas.
    fence: Arc<OnceLock<Arc<dyn Fence>>>,
    /// Jobs announced and not yet queued.
    coming: Arc<Coming>,
    /// Transactions committed and the jobs in them, since the writer began
    /// (the server counts them in its metrics).
    #[cfg(test)]
    committed: Arc<Committed>,
}

/// Jobs callers said are on their way
/// ([`Store::expect`](super::Store::expect)).
#[derive(Debug, Default)]
struct Coming {
    count: AtomicUsize,
    /// Woken when `count` falls to zero.
    none: Notify,
}

/// What the writer has committed: transactions, and the jobs in them.
#[derive(Debug, Default)]
pub struct Committed {
    pub commits: AtomicU64,
    pub jobs: AtomicU64,
}

impl Committed {
    /// Counts a committed transaction of `jobs` jobs, here and in the
    /// server's metrics.
    fn record(&self, jobs: usize) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.jobs.fetch_add(jobs as u64, Ordering::Relaxed);
        crate::metrics::store_committed(jobs);
    }
}

/// A job on its way to the writer
/// ([`Store::expect`](super::Store::expect)); dropping it, once the job is
/// queued or when none will be after all, says it has come.
#[derive(Debug)]
#[must_use = "the writer waits while this lives"]
pub struct Expected(Arc<Coming>);

impl Drop for Expected {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none.notify_one();
        }
    }
}

impl Queue {
    /// Starts the writer on the current tokio runtime; it nudges
    /// `checkpointer` (SQLite's) after every batch.
    pub(super) fn start(
        pool: AnyPool,
        backend: Backend,
        checkpointer: Option<Checkpointer>,
    ) -> Queue {
        Queue::start_with_delay(pool, backend, checkpointer, COMMIT_DELAY)
    }

    /// [`Queue::start`] holding a batch open at most `commit_delay` for a
    /// job on its way.
    fn start_with_delay(
        pool: AnyPool,
        backend: Backend,
        checkpointer: Option<Checkpointer>,
        commit_delay: Duration,
    ) -> Queue {
        let (jobs, queued) = mpsc::unbounded_channel();
        let max_log_bytes = Arc::new(AtomicU64::new(DEFAULT_LOG_MAX_BYTES));
        let fence = Arc::new(OnceLock::new());
        let coming = Arc::new(Coming::default());
        let committed = Arc::new(Committed::default());
        let keep = Retain {
            trims: Trims::default(),
            max_log_bytes: Arc::clone(&max_log_bytes),
            fence: Arc::clone(&fence),
        };
        let gather = Gather {
            queued,
            coming: Arc::clone(&coming),
            commit_delay,
        };
        tokio::spawn(write_loop(
            pool,
            backend,
            gather,
            keep,
            checkpointer,
            Arc::clone(&committed),
        ));
        Queue {
            jobs,
            max_log_bytes,
            fence,
            coming,
            #[cfg(test)]
            committed,
        }
    }

    /// Says a job is on its way: until the returned guard is dropped, a
    /// batch the writer takes waits for it (up to the commit delay), so
    /// that it shares that batch's transaction.
    pub(super) fn expect(&self) -> Expected {
        self.coming.count.fetch_add(1, Ordering::AcqRel);
        Expected(Arc::clone(&self.coming))
    }

    /// What the writer has committed so far.
    #[cfg(test)]
    pub(super) fn committed(&self) -> &Committed {
        &self.committed
    }

    /// The fence, once set.
    pub(super) fn fence(&self) -> Option<&Arc<dyn Fence>> {
        self.fence.get()
    }

    /// Fences every later batch with `fence` (once; later calls are
    /// ignored).
    pub(super) fn set_fence(&self, fence: Arc<dyn Fence>) {
        let _ = self.fence.set(fence);
    }

    /// Sets the decisions log's byte budget, applied from the next batch
    /// that logs a decision.
    pub(super) fn set_max_log_bytes(&self, bytes: u64) {
        self.max_log_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Queues `rows`; jobs are stored in the order queued.
    pub(super) fn submit(&self, rows: Box<dyn Rows>) -> Ack {
        let (done, ack) = oneshot::channel();
        // Stamped now, under the caller's lock: the epoch the decision was
        // made under, not whichever one holds when the batch is written.
        let epochs = match self.fence.get() {
            Some(fence) => rows
                .clusters()
                .into_iter()
                .map(|cluster_id| (cluster_id, fence.epoch(cluster_id)))
                .collect(),
            None => Vec::new(),
        };
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(Job { rows, epochs, done }) {
            let _ = job
                .done
                .send(Err(PersistError::Failed("the writer stopped".to_owned())));
        }
        Ack(ack)
    }
}

/// A decision alone, as a job.
impl Rows for (LoggedDecision, Retention) {
    fn add_to(&self, batch: &mut Batch) -> Result<(), StoreError> {
        batch.log_decision(self.0.clone(), self.1);
        Ok(())
    }
}

/// When each cluster's log was last trimmed, and what was logged since.
#[derive(Default)]
struct Trims {
    last: HashMap<Uuid, (Instant, u32)>,
}

impl Trims {
    /// Counts `logged` new decisions of `cluster_id` and says whether its
    /// log is due for a trim under `retention`.
    fn due(&mut self, cluster_id: Uuid, logged: u32, retention: Retention, now: Instant) -> bool {
        let slack = (retention.count / TRIM_SLACK_DIVISOR).max(1);
        match self.last.get_mut(&cluster_id) {
            None => true,
            Some((at, since)) => {
                *since = since.saturating_add(logged);
                now.duration_since(*at) >= TRIM_INTERVAL || *since >= slack
            }
        }
    }

    fn trimmed(&mut self, cluster_id: Uuid, now: Instant) {
        self.last.insert(cluster_id, (now, 0));
    }
}

/// What the writer keeps between batches: when each cluster's log was
/// trimmed, and the log's byte budget.
struct Retain {
    trims: Trims,
    max_log_bytes: Arc<AtomicU64>,
    fence: Arc<OnceLock<Arc<dyn Fence>>>,
}

/// The writer's end of the queue: takes each batch.
struct Gather {
    queued: mpsc::UnboundedReceiver<Job>,
    coming: Arc<Coming>,
    commit_delay: Duration,
}

impl Gather {
    /// Fills `batch` with what is queued, waiting for a first job, and
    /// then for as many more as were announced on their way when it came
    /// (not for those announced later: under a steady stream there always
    /// is one, and waiting for it each time only made every answer later),
    /// until they have come or gone, the batch is full or `commit_delay`
    /// has passed. False once the queue is closed and drained.
    async fn next(&mut self, batch: &mut Vec<Job>) -> bool {
        if self.queued.recv_many(batch, MAX_BATCH_JOBS).await == 0 {
            return false;
        }
        let deadline = tokio::time::Instant::now() + self.commit_delay;
        let mut awaited = self.coming.count.load(Ordering::Acquire);
        while awaited > 0 && batch.len() < MAX_BATCH_JOBS {
            tokio::select! {
                biased;
                taken = self.queued.recv_many(batch, MAX_BATCH_JOBS - batch.len()) => {
                    if taken == 0 {
                        break;
                    }
                    awaited = awaited.saturating_sub(taken);
                }
                () = self.coming.none.notified() => {}
                () = tokio::time::sleep_until(deadline) => break,
            }
            // Announced jobs that came to nothing are not waited for.
            awaited = awaited.min(self.coming.count.load(Ordering::Acquire));
        }
        true
    }
}

async fn write_loop(
    pool: AnyPool,
    backend: Backend,
    mut gather: Gather,
    mut keep: Retain,
    checkpointer: Option<Checkpointer>,
    committed: Arc<Committed>,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH_JOBS);
    while gather.next(&mut batch).await {
        let result = write_jobs(&pool, backend, &batch, &mut keep).await;
        if result.is_ok() {
            committed.record(batch.len());
        }
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
                    let result = write_jobs(&pool, backend, alone, &mut keep)
                        .await
                        .map_err(PersistError::from);
                    if let Err(e) = &result {
                        tracing::error!(error = %e, "placement state not stored");
                    }
                    let _ = job.done.send(result);
                }
            }
            Err(e) => {
                let e = PersistError::from(e);
                tracing::error!(error = %e, "placement state not stored");
                for job in batch.drain(..) {
                    let _ = job.done.send(Err(e.clone()));
                }
            }
        }
        if let Some(checkpointer) = &checkpointer {
            checkpointer.nudge();
        }
    }
}

/// Applies `jobs` in one transaction.
async fn write_jobs(
    pool: &AnyPool,
    backend: Backend,
    jobs: &[Job],
    keep: &mut Retain,
) -> Result<(), StoreError> {
    let mut batch = Batch::default();
    for job in jobs {
        job.rows.add_to(&mut batch)?;
    }
    let mut db = begin(pool, backend, LockMode::Shared).await?;
    if let Some(fence) = keep.fence.get() {
        // In cluster order, the order lease renewals lock the same rows.
        let mut stamped: BTreeSet<(Uuid, i64)> = BTreeSet::new();
        for &(cluster_id, epoch) in jobs.iter().flat_map(|job| &job.epochs) {
            let epoch = epoch.ok_or(StoreError::NotOwner { cluster_id })?;
            stamped.insert((cluster_id, epoch));
        }
        if let Some(&cluster_id) = batch
            .clusters
            .keys()
            .find(|id| !stamped.iter().any(|(stamped, _)| stamped == *id))
        {
            return Err(StoreError::NotOwner { cluster_id });
        }
        for (cluster_id, epoch) in stamped {
            if !db
                .holds_cluster(cluster_id, fence.replica_id(), epoch)
                .await?
            {
                return Err(StoreError::NotOwner { cluster_id });
            }
        }
    }
    for (cluster_id, writes) in &batch.clusters {
        db.write_inventory(*cluster_id, &writes.inventory).await?;
        db.write_claims(*cluster_id, &writes.claims).await?;
    }
    db.insert_decisions(&batch.decisions).await?;
    let now = Instant::now();
    let trimmed = retain(&mut db, &batch, keep, now).await?;
    db.commit().await?;
    for cluster_id in trimmed {
        keep.trims.trimmed(cluster_id, now);
    }
    Ok(())
}

/// The decisions log's one retention rule, applied after each batch that
/// logged: each cluster that logged keeps its newest `count` decisions
/// younger than `max_age` (when due: see [`Trims`]), and then the whole
/// log is kept within its byte budget, full answers dropped before rows
/// (`Db::trim_decision_bytes`, one lookup when it fits, so at every such
/// batch: one large decision can be most of the budget). Returns the
/// clusters trimmed.
async fn retain(
    db: &mut Db,
    batch: &Batch,
    keep: &mut Retain,
    now: Instant,
) -> Result<BTreeSet<Uuid>, StoreError> {
    let mut trimmed = BTreeSet::new();
    if batch.logged.is_empty() {
        return Ok(trimmed);
    }
    for (&cluster_id, &(count, retention)) in &batch.logged {
        if keep.trims.due(cluster_id, count, retention, now) {
            db.trim_decisions(cluster_id, retention, Timestamp::now())
                .await?;
            trimmed.insert(cluster_id);
        }
    }
    db.trim_decision_bytes(keep.max_log_bytes.load(Ordering::Relaxed))
        .await?;
    Ok(trimmed)
}

#[derive(Default)]
struct ClusterWrites {
    inventory: InventoryWrites,
    claims: ClaimWrites,
}

/// The writes of the jobs in one transaction, reduced to their final
/// effect: a row changed several times in one batch is written once, as it
/// ends.
#[derive(Default)]
pub struct Batch {
    clusters: BTreeMap<Uuid, ClusterWrites>,
    decisions: Vec<LoggedDecision>,
    /// Per cluster that logged: how many decisions, and the retention it
    /// asked for (the last one queued wins).
    logged: BTreeMap<Uuid, (u32, Retention)>,
}

impl Batch {
    fn cluster(&mut self, cluster_id: Uuid) -> &mut ClusterWrites {
        self.clusters.entry(cluster_id).or_default()
    }

    fn host(&mut self, cluster_id: Uuid, host_id: &str, write: HostWrite) {
        self.cluster(cluster_id).inventory.host(host_id, write);
    }

    /// A snapshot replaces every stored host (and removal) of the cluster;
    /// the hosts it holds follow as [`Batch::put_host`]s.
    pub fn replace_hosts(&mut self, cluster_id: Uuid) {
        self.cluster(cluster_id).inventory.replace();
    }

    /// Stores a host's record (JSON) at `generation`.
    pub fn put_host(&mut self, cluster_id: Uuid, host_id: &str, generation: u64, record: String) {
        self.host(cluster_id, host_id, HostWrite::Put { generation, record });
    }

    /// Forgets a host, remembering the generation that removed it.
    pub fn remove_host(&mut self, cluster_id: Uuid, host_id: &str, generation: u64) {
        self.host(cluster_id, host_id, HostWrite::Removed(generation));
    }

    /// Sets the cluster's held and snapshot generations.
    pub fn set_generations(&mut self, cluster_id: Uuid, generation: u64, snapshot_generation: u64) {
        self.cluster(cluster_id).inventory.generations = Some((generation, snapshot_generation));
    }

    /// Stores a claim, replacing the VM's previous one.
    pub fn put_claim(&mut self, cluster_id: Uuid, claim: ClaimRow) {
        self.cluster(cluster_id)
            .claims
            .insert(claim.vm_id.clone(), Some(claim));
    }

    /// Deletes the VM's claim.
    pub fn delete_claim(&mut self, cluster_id: Uuid, vm_id: &str) {
        self.cluster(cluster_id)
            .claims
            .insert(vm_id.to_owned(), None);
    }

    /// Logs a decision, its cluster's log kept to `retention`.
    pub fn log_decision(&mut self, decision: LoggedDecision, retention: Retention) {
        let logged = self
            .logged
            .entry(decision.cluster_id)
            .or_insert((0, retention));
        *logged = (logged.0.saturating_add(1), retention);
        self.decisions.push(decision);
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::TestDb;
    use super::*;

    /// A queue of its own over `db`'s store, writing through the store's
    /// writer pool (the store's own queue sits idle).
    async fn queue(db: &TestDb, commit_delay: Duration) -> (Store, Queue) {
        let store = db.open().await;
        let queue =
            Queue::start_with_delay(store.writer_pool.clone(), db.backend(), None, commit_delay);
        (store, queue)
    }

    fn committed(queue: &Queue) -> (u64, u64) {
        let committed = queue.committed();
        (
            committed.commits.load(Ordering::Relaxed),
            committed.jobs.load(Ordering::Relaxed),
        )
    }

    /// Waits for `ack`, failing the test if that takes a minute: far
    /// less than the ten-minute delay a wrongful wait would take.
    async fn stored_promptly(ack: Ack, what: &str) {
        tokio::time::timeout(Duration::from_secs(60), ack.wait())
            .await
            .unwrap_or_else(|_| panic!("{what}: waited"))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    /// A job announced and a first one queued, on a queue whose delay is
    /// ten minutes: returned once the writer has taken the first and
    /// waits for the announced one, however long that takes.
    async fn waiting_for_one(db: &TestDb) -> (Store, Queue, Expected, Ack) {
        let (store, queue) = queue(db, Duration::from_secs(600)).await;
        let coming = queue.expect();
        let first = queue.submit(Box::new(Nothing));
        tokio::time::sleep(Duration::from_millis(50)).await;
        (store, queue, coming, first)
    }

    #[tokio::test]
    async fn a_job_on_its_way_shares_the_commit_of_the_one_before_it() {
        let db = TestDb::sqlite();
        let (_store, queue, coming, first) = waiting_for_one(&db).await;
        assert_eq!(committed(&queue), (0, 0), "nothing committed yet");
        let second = queue.submit(Box::new(Nothing));
        drop(coming);
        first.wait().await.expect("first stored");
        second.wait().await.expect("second stored");
        assert_eq!(committed(&queue), (1, 2), "one commit of both jobs");
    }

    #[tokio::test]
    async fn a_job_announced_after_the_batch_began_is_not_waited_for() {
        let db = TestDb::sqlite();
        let (_store, queue, coming, first) = waiting_for_one(&db).await;
        // The next decision begins before the awaited one is queued, as
        // turns do back to back: the batch waits for the one it was told
        // of, not for this one.
        let _next = queue.expect();
        let second = queue.submit(Box::new(Nothing));
        drop(coming);
        stored_promptly(first, "first, without waiting for the next").await;
        stored_promptly(second, "second, without waiting for the next").await;
        assert_eq!(committed(&queue), (1, 2));
    }

    #[tokio::test]
    async fn with_nothing_on_its_way_a_job_is_committed_at_once() {
        let db = TestDb::sqlite();
        let (_store, queue) = queue(&db, Duration::from_secs(600)).await;
        stored_promptly(queue.submit(Box::new(Nothing)), "a lone job").await;
        // An announcement that came to nothing leaves no wait behind.
        drop(queue.expect());
        stored_promptly(
            queue.submit(Box::new(Nothing)),
            "a job after an announcement that came to nothing",
        )
        .await;
        assert_eq!(committed(&queue), (2, 2));
    }

    #[tokio::test]
    async fn the_commit_delay_bounds_the_wait_for_a_job_that_never_comes() {
        let db = TestDb::sqlite();
        let (_store, queue) = queue(&db, Duration::from_millis(20)).await;
        let _never = queue.expect();
        stored_promptly(queue.submit(Box::new(Nothing)), "committed after the delay").await;
        assert_eq!(committed(&queue), (1, 1));
    }

    fn retention(count: u32) -> Retention {
        Retention {
            count,
            max_age: Duration::from_secs(3600),
        }
    }

    #[test]
    fn a_small_log_is_trimmed_at_every_batch_a_large_one_every_eighth() {
        let cluster = Uuid::new_v4();
        let now = Instant::now();
        let mut trims = Trims::default();
        assert!(trims.due(cluster, 1, retention(2), now), "first batch");
        trims.trimmed(cluster, now);
        assert!(
            trims.due(cluster, 1, retention(2), now),
            "count 2: every batch"
        );
        trims.trimmed(cluster, now);

        assert!(!trims.due(cluster, 100, retention(1000), now));
        assert!(
            trims.due(cluster, 25, retention(1000), now),
            "125 = 1000 / 8"
        );
        trims.trimmed(cluster, now);
        assert!(!trims.due(cluster, 1, retention(1000), now));
        assert!(trims.due(cluster, 0, retention(1000), now + TRIM_INTERVAL));
    }

    #[test]
    fn a_row_written_twice_in_a_batch_is_written_once_as_it_ends() {
        let cluster = Uuid::new_v4();
        let mut batch = Batch::default();
        batch.put_host(cluster, "a", 1, "{}".to_owned());
        batch.put_host(cluster, "b", 1, "{}".to_owned());
        batch.remove_host(cluster, "a", 2);
        let hosts = &batch.clusters[&cluster].inventory.hosts;
        assert_eq!(
            hosts.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(hosts[0].1, HostWrite::Removed(2));
        batch.replace_hosts(cluster);
        batch.put_host(cluster, "c", 3, "{}".to_owned());
        let inventory = &batch.clusters[&cluster].inventory;
        assert!(inventory.replaced);
        assert_eq!(inventory.hosts.len(), 1);
    }
}
