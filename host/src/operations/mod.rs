//! The operations queue (issue #12): what should happen next in a cluster
//! (a migration the balance loop decided, a start for a VM pool, any kind
//! an engine defines), leased by the engine's workers, carried out, and
//! reported back. docs/operations.md describes it for engine authors.
//!
//! [`OperationsService`] holds, per cluster, the unfinished operations in
//! memory (`queue::ClusterQueue`), loaded from the store at start. Every
//! change is written to the store in a transaction committed before the
//! caller is answered, under the cluster's lock, and only then applied in
//! memory: an acknowledged submit, lease or completion survives kill -9,
//! and the memory never holds what the store lacks.
//!
//! **Which operation is leased next** is `sandpiper_queue::next` in
//! predictive order (Ganeti's predictive queue: priority, then the
//! contention weight against the leased operations' locks, aged, then
//! submit order); an operation whose known locks conflict with a leased
//! one is never leased beside it, and at most
//! [`OperationsConfig::max_leased`] operations of a cluster are leased at
//! once (Ganeti's parallel-job limit).
//!
//! **Leases** have a time to live; a worker renews its lease while it
//! works. A lease not renewed in time expires (the sweeper task, or the
//! next lease on the cluster, notices) and the operation is queued again
//! with its attempt count kept. Expiry times are wall-clock milliseconds,
//! so a lease taken before a restart is honoured after it until then.
//!
//! **Claims.** An operation Sandpiper made for a placement carries the
//! VM's claim (`vm_id`): when it succeeds the claim is confirmed, when it
//! fails or is cancelled the claim is released (`crate::placement`).

mod args;
mod events;
mod locks;
mod model;
mod queue;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, broadcast, watch};
use uuid::Uuid;

use sandpiper_queue::Locks;

pub use args::OperationsArgs;
pub use events::{Event, EventKind};
pub use locks::{migration_locks, start_locks};
pub use model::{
    Kind, KindError, Lease, MAX_KIND_CHARS, NewOperation, Operation, Origin, Outcome, State,
};
use queue::ClusterQueue;

use crate::names;
use crate::placement::{ClaimError, PlacementError, PlacementService};
use crate::store::{Store, StoreError};
use crate::time::Timestamp;

/// Operations of one cluster leased at once, when not configured
/// (`--max-leased-operations`): Ganeti's default for parallel jobs is
/// larger, but a cluster's engine runs migrations and starts through a
/// handful of workers, and more migrations at once mostly share the same
/// network links. Engines with more workers raise it.
pub const DEFAULT_MAX_LEASED: usize = 4;

/// Operations one cluster may have queued, when not configured
/// (`--max-queued-operations`). The picker reads every queued operation
/// on each lease (under a millisecond at 10,000, issue #12); beyond that a
/// submit is refused 503 `queue_full`, so a runaway submitter cannot make
/// every lease slow or the memory grow without end.
pub const DEFAULT_MAX_QUEUED: usize = 10_000;

/// A lease's time to live when the worker does not ask for one: a minute
/// is several renewals' worth for a worker renewing every 20 s, and what
/// an operation is delayed when its worker dies.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(60);

/// The shortest lease a worker may ask for: below a second, a renewal
/// round trip under load would lose it.
pub const MIN_LEASE_TTL: Duration = Duration::from_secs(1);

/// The longest lease a worker may ask for: an hour. Longer work renews;
/// a longer lease would hide a dead worker for longer.
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(3600);

/// The longest a lease request waits for an operation (long poll): 30 s
/// stays under the idle timeouts of common proxies and load balancers.
pub const MAX_LEASE_WAIT: Duration = Duration::from_secs(30);

/// Largest payload of an operation, and largest detail of an outcome, as
/// JSON bytes: both are small structured records (a VM id, a host, an
/// error message), and every listing and event carries them.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;

/// Kinds a lease request may filter on: a worker handles a few kinds.
pub const MAX_LEASE_KINDS: usize = 32;

/// How often expired leases are looked for even when no lease request
/// arrives: an expired lease is back in the queue within a second.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How long a finished operation is kept, when not configured
/// (`--operations-max-age-days`): a month, as the decisions log, so that
/// "what happened to this migration" is answerable for any recent
/// incident.
pub const DEFAULT_FINISHED_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// How often finished operations past their age are deleted.
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(3600);

/// Rows one retention pass deletes per transaction, so that it never
/// holds the database's write lock for long.
const RETENTION_BATCH: u32 = 5_000;

/// Queue changes kept for a slow event-stream reader before it is told
/// it lagged (and should list again).
pub const EVENT_BUFFER: usize = 1024;

/// The service's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationsConfig {
    pub max_leased: usize,
    pub max_queued: usize,
    pub default_lease_ttl: Duration,
    pub sweep_interval: Duration,
    /// How long a finished operation is kept in the store.
    pub finished_max_age: Duration,
    /// The predictive order's base value, tick and starvation ticks.
    pub order: sandpiper_queue::Config,
}

impl Default for OperationsConfig {
    fn default() -> Self {
        OperationsConfig {
            max_leased: DEFAULT_MAX_LEASED,
            max_queued: DEFAULT_MAX_QUEUED,
            default_lease_ttl: DEFAULT_LEASE_TTL,
            sweep_interval: SWEEP_INTERVAL,
            finished_max_age: DEFAULT_FINISHED_MAX_AGE,
            order: sandpiper_queue::Config::default(),
        }
    }
}

/// Why an operation request failed.
#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    #[error("cluster `{cluster_id}` does not exist")]
    ClusterNotFound { cluster_id: Uuid },
    #[error("operation `{id}` does not exist in this cluster")]
    NotFound { id: Uuid },
    /// The lease given is not the operation's current lease: it expired
    /// (the operation may have been leased again), or was never its.
    #[error("lease `{lease_id}` does not hold operation `{id}`: {reason}")]
    LeaseLost {
        id: Uuid,
        lease_id: Uuid,
        reason: &'static str,
    },
    #[error("operation `{id}` is already {}", state.as_str())]
    Finished { id: Uuid, state: State },
    #[error("cluster `{cluster_id}` has {limit} operations queued, its limit")]
    QueueFull { cluster_id: Uuid, limit: usize },
    /// A value of the request is not acceptable; `field` names it.
    #[error("invalid `{field}`: {message}")]
    Invalid { field: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl OperationError {
    fn invalid(field: impl Into<String>, message: impl ToString) -> OperationError {
        OperationError::Invalid {
            field: field.into(),
            message: message.to_string(),
        }
    }
}

/// What a worker asks to lease.
#[derive(Clone, Debug)]
pub struct LeaseRequest {
    /// Who takes the lease (a worker's name, for listings and logs).
    pub holder: String,
    /// Only operations of these kinds (all when `None`).
    pub kinds: Option<Vec<Kind>>,
    /// The lease's time to live (the default when `None`).
    pub ttl: Option<Duration>,
    /// How long to wait for an operation when none can be leased now.
    pub wait: Duration,
}

/// The service; cloning shares it.
#[derive(Clone)]
pub struct OperationsService {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    placement: PlacementService,
    config: OperationsConfig,
    clusters: Mutex<HashMap<Uuid, Arc<Slot>>>,
    /// The next submit sequence number (server-wide).
    next_seq: AtomicU64,
    /// Set when the server stops: long polls answer and event streams end,
    /// so that graceful shutdown does not wait for them.
    stopping: watch::Sender<bool>,
}

/// One cluster's queue, the signal raised on every change to it (what
/// waiting lease requests wake on), and its event stream.
struct Slot {
    queue: tokio::sync::Mutex<ClusterQueue>,
    changed: Notify,
    events: broadcast::Sender<Event>,
}

impl Slot {
    fn new(queue: ClusterQueue) -> Slot {
        Slot {
            queue: tokio::sync::Mutex::new(queue),
            changed: Notify::new(),
            events: broadcast::channel(EVENT_BUFFER).0,
        }
    }

    /// Wakes waiting lease requests and tells event readers.
    fn publish(&self, kind: EventKind, op: &Operation) {
        self.changed.notify_waiters();
        // No reader is not an error.
        let _ = self.events.send(Event::new(kind, op));
    }
}

impl OperationsService {
    /// Loads the unfinished operations from the store and starts the lease
    /// sweeper on the current tokio runtime. `every_cluster`: of every
    /// cluster, as the one server on an SQLite file does; otherwise none,
    /// and each cluster's are loaded when this replica takes the cluster
    /// over ([`OperationsService::adopt`], docs/fleet.md).
    pub async fn start(
        store: Store,
        placement: PlacementService,
        config: OperationsConfig,
        every_cluster: bool,
    ) -> Result<OperationsService, StoreError> {
        let mut conn = store.read().await?;
        let rows = if every_cluster {
            conn.unfinished_operations().await?
        } else {
            Vec::new()
        };
        let last_seq = conn.last_operation_seq().await?;
        drop(conn);
        let mut queues: HashMap<Uuid, ClusterQueue> = HashMap::new();
        for row in rows {
            let op = Operation::from_row(row)?;
            queues.entry(op.cluster_id).or_default().insert(op);
        }
        let clusters = queues
            .into_iter()
            .map(|(id, queue)| (id, Arc::new(Slot::new(queue))))
            .collect();
        let sweep_interval = config.sweep_interval;
        let inner = Arc::new(Inner {
            store,
            placement,
            config,
            clusters: Mutex::new(clusters),
            next_seq: AtomicU64::new(last_seq.map_or(0, |s| s + 1)),
            stopping: watch::channel(false).0,
        });
        tokio::spawn(sweep(Arc::downgrade(&inner), sweep_interval));
        Ok(OperationsService { inner })
    }

    pub fn config(&self) -> &OperationsConfig {
        &self.inner.config
    }

    fn slot(&self, cluster_id: Uuid) -> Arc<Slot> {
        self.inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(cluster_id)
            .or_insert_with(|| Arc::new(Slot::new(ClusterQueue::default())))
            .clone()
    }

    fn existing_slot(&self, cluster_id: Uuid) -> Option<Arc<Slot>> {
        self.inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&cluster_id)
            .cloned()
    }

    /// The server is stopping: waiting lease requests answer "nothing" and
    /// event streams end.
    pub fn shut_down(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Becomes true when the server stops.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.inner.stopping.subscribe()
    }

    /// Takes over a cluster's queue as stored: this replica now owns the
    /// cluster, and whatever it held of it before (if it owned it once)
    /// may be stale. Submit numbers continue after the highest stored for
    /// the cluster, so its queue keeps its order.
    pub async fn adopt(&self, cluster_id: Uuid) -> Result<(), StoreError> {
        let mut conn = self.inner.store.read().await?;
        let rows = conn.unfinished_operations_of(cluster_id).await?;
        let last_seq = conn.last_operation_seq_of(cluster_id).await?;
        drop(conn);
        let mut queue = ClusterQueue::default();
        for row in rows {
            queue.insert(Operation::from_row(row)?);
        }
        if let Some(last) = last_seq {
            self.inner.next_seq.fetch_max(last + 1, Ordering::Relaxed);
        }
        self.inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(cluster_id, Arc::new(Slot::new(queue)));
        Ok(())
    }

    /// Forgets a cluster's queue: the cluster was deleted (its rows went
    /// with it), or another replica owns it now.
    pub fn forget(&self, cluster_id: Uuid) {
        self.inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&cluster_id);
    }

    /// Queues an operation. Its kind, priority, locks, payload and VM are
    /// checked here, whoever submits.
    pub async fn submit(&self, new: NewOperation) -> Result<Operation, OperationError> {
        check_new(&new)?;
        let slot = self.slot(new.cluster_id);
        let mut queue = slot.queue.lock().await;
        if queue.queued_len() >= self.inner.config.max_queued {
            return Err(OperationError::QueueFull {
                cluster_id: new.cluster_id,
                limit: self.inner.config.max_queued,
            });
        }
        let op = Operation {
            id: new.id,
            cluster_id: new.cluster_id,
            seq: self.inner.next_seq.fetch_add(1, Ordering::Relaxed),
            kind: new.kind,
            priority: new.priority,
            locks: new.locks,
            payload: new.payload,
            origin: new.origin,
            vm_id: new.vm_id,
            state: State::Queued,
            attempts: 0,
            submitted_at: Timestamp::now(),
            lease: None,
            finished_at: None,
            detail: None,
        };
        let row = op.to_row()?;
        let mut tx = self.inner.store.write_for(op.cluster_id).await?;
        if tx.cluster(op.cluster_id).await?.is_none() {
            // Leave no queue behind for a cluster that does not exist.
            let empty = queue.queued_len() == 0 && queue.leased_len() == 0;
            drop(queue);
            if empty {
                self.forget(op.cluster_id);
            }
            return Err(OperationError::ClusterNotFound {
                cluster_id: op.cluster_id,
            });
        }
        tx.insert_operation(&row).await?;
        tx.commit().await?;
        queue.insert(op.clone());
        slot.publish(EventKind::Submitted, &op);
        Ok(op)
    }

    /// Unfinished (queued or leased) operations of a cluster in submit
    /// order, for the balance loop and the pools monitor.
    pub async fn in_flight(&self, cluster_id: Uuid) -> Vec<Operation> {
        match self.existing_slot(cluster_id) {
            Some(slot) => slot.queue.lock().await.in_flight(),
            None => Vec::new(),
        }
    }

    /// Queued and leased operations of every cluster.
    pub async fn unfinished_count(&self) -> usize {
        let slots: Vec<Arc<Slot>> = self
            .inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        let mut count = 0;
        for slot in slots {
            let queue = slot.queue.lock().await;
            count += queue.queued_len() + queue.leased_len();
        }
        count
    }

    /// One operation of a cluster, finished or not.
    pub async fn get(&self, cluster_id: Uuid, id: Uuid) -> Result<Operation, OperationError> {
        if let Some(slot) = self.existing_slot(cluster_id)
            && let Some(op) = slot.queue.lock().await.get(id)
        {
            return Ok(op.clone());
        }
        let mut conn = self.inner.store.read().await?;
        match conn.operation(cluster_id, id).await? {
            Some(row) => Ok(Operation::from_row(row)?),
            None => Err(OperationError::NotFound { id }),
        }
    }

    /// A cluster's operations in submit order, of one state or all, at
    /// most `limit`, after sequence number `after`.
    pub async fn list(
        &self,
        cluster_id: Uuid,
        state: Option<State>,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<Operation>, OperationError> {
        let mut conn = self.inner.store.read().await?;
        let rows = conn
            .operations(cluster_id, state.map(|s| s.as_str()), after, limit)
            .await?;
        drop(conn);
        Ok(rows
            .into_iter()
            .map(Operation::from_row)
            .collect::<Result<_, _>>()?)
    }

    /// Leases the next operation of the cluster for `request.holder`,
    /// waiting up to `request.wait` (at most [`MAX_LEASE_WAIT`]) for one
    /// when none can be leased now: a submit, a completion, a cancel or an
    /// expiry on the cluster wakes the wait. `None`: nothing came in time.
    pub async fn lease(
        &self,
        cluster_id: Uuid,
        request: LeaseRequest,
    ) -> Result<Option<Operation>, OperationError> {
        check_lease(&request)?;
        let ttl = request.ttl.unwrap_or(self.inner.config.default_lease_ttl);
        let deadline = tokio::time::Instant::now() + request.wait.min(MAX_LEASE_WAIT);
        let slot = self.slot(cluster_id);
        let mut stopping = self.stopping();
        loop {
            // Registered before looking, so a change between the look and
            // the wait still wakes it.
            let changed = slot.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(op) = self.try_lease(&slot, &request, ttl).await? {
                return Ok(Some(op));
            }
            if *stopping.borrow() {
                return Ok(None);
            }
            tokio::select! {
                () = &mut changed => {}
                () = tokio::time::sleep_until(deadline) => return Ok(None),
                _ = stopping.changed() => return Ok(None),
            }
        }
    }

    async fn try_lease(
        &self,
        slot: &Slot,
        request: &LeaseRequest,
        ttl: Duration,
    ) -> Result<Option<Operation>, OperationError> {
        let mut queue = slot.queue.lock().await;
        let now = Timestamp::now();
        self.expire_locked(slot, &mut queue, now).await?;
        let Some(chosen) = queue.next(
            now,
            request.kinds.as_deref(),
            self.inner.config.max_leased,
            &self.inner.config.order,
        ) else {
            return Ok(None);
        };
        let mut op = chosen.clone();
        op.state = State::Leased;
        op.attempts = op.attempts.saturating_add(1);
        op.lease = Some(Lease {
            id: Uuid::new_v4(),
            holder: request.holder.clone(),
            expires_at: now.after(ttl),
        });
        if !self.write(&op).await? {
            queue.remove(op.id);
            return Ok(None);
        }
        queue.remove(op.id);
        queue.insert(op.clone());
        slot.publish(EventKind::Leased, &op);
        Ok(Some(op))
    }

    /// Extends a lease by `ttl` (the default when `None`) from now.
    pub async fn renew(
        &self,
        cluster_id: Uuid,
        id: Uuid,
        lease_id: Uuid,
        ttl: Option<Duration>,
    ) -> Result<Operation, OperationError> {
        let ttl = check_ttl(ttl)?.unwrap_or(self.inner.config.default_lease_ttl);
        let slot = self.slot(cluster_id);
        let mut queue = slot.queue.lock().await;
        let now = Timestamp::now();
        let mut op = self.held(cluster_id, &queue, id, lease_id, now).await?;
        if let Some(lease) = op.lease.as_mut() {
            lease.expires_at = now.after(ttl);
        }
        if !self.write(&op).await? {
            queue.remove(id);
            return Err(OperationError::NotFound { id });
        }
        queue.remove(id);
        queue.insert(op.clone());
        slot.publish(EventKind::Renewed, &op);
        Ok(op)
    }

    /// Records how a leased operation ended and releases what it held: its
    /// locks, and the claim it carries (confirmed when it succeeded,
    /// released when it failed).
    pub async fn complete(
        &self,
        cluster_id: Uuid,
        id: Uuid,
        lease_id: Uuid,
        outcome: Outcome,
        detail: Option<Value>,
    ) -> Result<Operation, OperationError> {
        check_detail(detail.as_ref())?;
        let slot = self.slot(cluster_id);
        let queue = slot.queue.lock().await;
        let now = Timestamp::now();
        let mut op = self.held(cluster_id, &queue, id, lease_id, now).await?;
        op.state = outcome.state();
        op.finished_at = Some(now);
        op.detail = detail;
        let covered_from = match outcome {
            Outcome::Succeeded { covered_from } => covered_from,
            Outcome::Failed => None,
        };
        // The lease that finished it stays in the row (who did it); the
        // operation is no longer leased.
        self.finish(&slot, queue, op, EventKind::Completed, covered_from)
            .await
    }

    /// Ends an operation taken from the cluster's queue (completed or
    /// cancelled): stores it, takes it out of the queue (freeing its
    /// locks), tells readers, and settles the claim it carries
    /// (`covered_from`: see [`Outcome::Succeeded`]).
    async fn finish(
        &self,
        slot: &Slot,
        mut queue: tokio::sync::MutexGuard<'_, ClusterQueue>,
        op: Operation,
        event: EventKind,
        covered_from: Option<u64>,
    ) -> Result<Operation, OperationError> {
        let id = op.id;
        if !self.write(&op).await? {
            queue.remove(id);
            return Err(OperationError::NotFound { id });
        }
        queue.remove(id);
        drop(queue);
        slot.publish(event, &op);
        self.settle_claim(&op, covered_from).await;
        Ok(op)
    }

    /// Cancels a queued or leased operation (a leased one's worker learns
    /// it at its next renewal or completion: `lease_lost`), releasing the
    /// claim it carries.
    pub async fn cancel(&self, cluster_id: Uuid, id: Uuid) -> Result<Operation, OperationError> {
        let slot = self.slot(cluster_id);
        let queue = slot.queue.lock().await;
        let Some(current) = queue.get(id) else {
            drop(queue);
            let op = self.get(cluster_id, id).await?;
            return Err(OperationError::Finished {
                id,
                state: op.state,
            });
        };
        let mut op = current.clone();
        op.state = State::Cancelled;
        op.finished_at = Some(Timestamp::now());
        self.finish(&slot, queue, op, EventKind::Cancelled, None)
            .await
    }

    /// The events of a cluster's queue from now on.
    pub fn subscribe(&self, cluster_id: Uuid) -> broadcast::Receiver<Event> {
        self.slot(cluster_id).events.subscribe()
    }

    /// The leased operation `id` if `lease_id` holds it at `now`.
    async fn held(
        &self,
        cluster_id: Uuid,
        queue: &ClusterQueue,
        id: Uuid,
        lease_id: Uuid,
        now: Timestamp,
    ) -> Result<Operation, OperationError> {
        let lost = |reason| OperationError::LeaseLost {
            id,
            lease_id,
            reason,
        };
        let Some(op) = queue.get(id) else {
            // Not in the queue: finished, or not this cluster's.
            let mut conn = self.inner.store.read().await?;
            let row = conn.operation(cluster_id, id).await?;
            return match row {
                Some(row) => {
                    let op = Operation::from_row(row)?;
                    if op.lease.as_ref().is_some_and(|l| l.id == lease_id) {
                        Err(OperationError::Finished {
                            id,
                            state: op.state,
                        })
                    } else {
                        Err(lost("the operation is finished, and not by this lease"))
                    }
                }
                None => Err(OperationError::NotFound { id }),
            };
        };
        match &op.lease {
            None => Err(lost("the operation is queued: the lease expired")),
            Some(lease) if lease.id != lease_id => {
                Err(lost("the operation is held by another lease"))
            }
            Some(lease) if lease.expires_at <= now => Err(lost("the lease expired")),
            Some(_) => Ok(op.clone()),
        }
    }

    /// Writes an operation's new state; `false` when its row is gone (its
    /// cluster was deleted).
    async fn write(&self, op: &Operation) -> Result<bool, OperationError> {
        let row = op.to_row()?;
        let mut tx = self.inner.store.write_for(op.cluster_id).await?;
        let found = tx.update_operation(&row).await?;
        tx.commit().await?;
        Ok(found)
    }

    /// Returns the cluster's expired leases' operations to the queue, their
    /// attempts kept.
    async fn expire_locked(
        &self,
        slot: &Slot,
        queue: &mut ClusterQueue,
        now: Timestamp,
    ) -> Result<(), OperationError> {
        for id in queue.expired(now) {
            let Some(current) = queue.get(id) else {
                continue;
            };
            let mut op = current.clone();
            let holder = op.lease.take().map(|l| l.holder);
            op.state = State::Queued;
            let found = self.write(&op).await?;
            queue.remove(id);
            if found {
                tracing::info!(
                    operation = %op.id, cluster = %op.cluster_id, kind = %op.kind,
                    holder = holder.as_deref().unwrap_or(""), attempts = op.attempts,
                    "lease expired; operation queued again"
                );
                queue.insert(op.clone());
                slot.publish(EventKind::Expired, &op);
            }
        }
        Ok(())
    }

    /// Confirms (succeeded, covered from `covered_from`) or releases
    /// (failed, cancelled) the claim a finished operation carries. A claim
    /// already gone (expired, released by the engine) is not the
    /// completion's error: logged only.
    async fn settle_claim(&self, op: &Operation, covered_from: Option<u64>) {
        let Some(vm_id) = op.vm_id.clone() else {
            return;
        };
        let placement = &self.inner.placement;
        let (action, result) = match op.state {
            State::Succeeded => (
                "confirmed",
                placement
                    .confirm(op.cluster_id, vm_id.clone(), covered_from)
                    .await
                    .map(drop),
            ),
            _ => (
                "released",
                placement
                    .release(op.cluster_id, vm_id.clone())
                    .await
                    .map(drop),
            ),
        };
        match result {
            Ok(()) => tracing::debug!(operation = %op.id, vm = %vm_id, "claim {action}"),
            Err(PlacementError::Claim(ClaimError::NoClaim { .. })) => tracing::info!(
                operation = %op.id, vm = %vm_id, state = op.state.as_str(),
                "the operation's claim was already gone (expired or ended by the engine)"
            ),
            Err(e) => tracing::warn!(
                operation = %op.id, vm = %vm_id, error = %e,
                "the operation finished but its claim could not be {action}"
            ),
        }
    }
}

impl OperationsService {
    /// Deletes the operations that finished more than
    /// [`OperationsConfig::finished_max_age`] ago.
    async fn drop_old_finished(&self) {
        let before = Timestamp(
            Timestamp::now()
                .0
                .saturating_sub(self.inner.config.finished_max_age.as_millis() as u64),
        );
        loop {
            let deleted = async {
                let mut tx = self.inner.store.write().await?;
                let deleted = tx
                    .delete_finished_operations(before.0, RETENTION_BATCH)
                    .await?;
                tx.commit().await?;
                Ok::<u64, StoreError>(deleted)
            }
            .await;
            match deleted {
                Ok(n) if n == u64::from(RETENTION_BATCH) => continue,
                Ok(n) => {
                    if n > 0 {
                        tracing::info!(deleted = n, "finished operations past their age deleted");
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not delete old finished operations");
                    return;
                }
            }
        }
    }

    /// Extends the claims every in-flight operation carries by another
    /// claim TTL (see [`sweep`]).
    async fn keep_claims_alive(&self) {
        let slots: Vec<(Uuid, Arc<Slot>)> = self
            .inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, slot)| (*id, slot.clone()))
            .collect();
        for (cluster_id, slot) in slots {
            let vm_ids: Vec<String> = slot
                .queue
                .lock()
                .await
                .in_flight()
                .into_iter()
                .filter_map(|op| op.vm_id)
                .collect();
            if vm_ids.is_empty() {
                continue;
            }
            match self.inner.placement.extend_claims(cluster_id, vm_ids).await {
                Ok(extended) => {
                    tracing::debug!(cluster = %cluster_id, extended, "claims of operations in flight kept alive");
                }
                Err(e) => tracing::warn!(
                    cluster = %cluster_id, error = %e,
                    "could not keep the claims of operations in flight alive"
                ),
            }
        }
    }
}

/// Checks an operation to submit.
fn check_new(new: &NewOperation) -> Result<(), OperationError> {
    if !(sandpiper_queue::PRIORITY_HIGHEST..=sandpiper_queue::PRIORITY_LOWEST)
        .contains(&new.priority)
    {
        return Err(OperationError::invalid(
            "priority",
            format!(
                "must be from {} (most urgent) to {}",
                sandpiper_queue::PRIORITY_HIGHEST,
                sandpiper_queue::PRIORITY_LOWEST
            ),
        ));
    }
    check_locks(&new.locks)?;
    let bytes = new.payload.to_string().len();
    if bytes > MAX_PAYLOAD_BYTES {
        return Err(OperationError::invalid(
            "payload",
            format!("{bytes} bytes of JSON, more than the {MAX_PAYLOAD_BYTES} allowed"),
        ));
    }
    if let Some(vm_id) = &new.vm_id {
        names::check_id(vm_id).map_err(|e| OperationError::invalid("vm_id", e))?;
    }
    Ok(())
}

/// Checks a lock declaration: the queue crate's rules, and every name an
/// id by `crate::names` (what hosts and VMs are called).
pub fn check_locks(locks: &Locks) -> Result<(), OperationError> {
    locks
        .validate()
        .map_err(|e| OperationError::invalid(format!("locks.{}", e.level.name()), e.message))?;
    for level in sandpiper_queue::Level::ALL {
        for name in locks.level(level).names().into_iter().flatten() {
            names::check_id(name).map_err(|e| {
                OperationError::invalid(format!("locks.{}", level.name()), format!("`{name}` {e}"))
            })?;
        }
    }
    Ok(())
}

fn check_ttl(ttl: Option<Duration>) -> Result<Option<Duration>, OperationError> {
    match ttl {
        Some(ttl) if !(MIN_LEASE_TTL..=MAX_LEASE_TTL).contains(&ttl) => {
            Err(OperationError::invalid(
                "ttl_ms",
                format!(
                    "must be from {} to {}",
                    MIN_LEASE_TTL.as_millis(),
                    MAX_LEASE_TTL.as_millis()
                ),
            ))
        }
        ttl => Ok(ttl),
    }
}

fn check_lease(request: &LeaseRequest) -> Result<(), OperationError> {
    names::check_id(&request.holder).map_err(|e| OperationError::invalid("holder", e))?;
    check_ttl(request.ttl)?;
    if request.wait > MAX_LEASE_WAIT {
        return Err(OperationError::invalid(
            "wait_ms",
            format!("must be at most {}", MAX_LEASE_WAIT.as_millis()),
        ));
    }
    if let Some(kinds) = &request.kinds
        && (kinds.is_empty() || kinds.len() > MAX_LEASE_KINDS)
    {
        return Err(OperationError::invalid(
            "kinds",
            format!("must list 1 to {MAX_LEASE_KINDS} kinds (leave it out for all)"),
        ));
    }
    Ok(())
}

fn check_detail(detail: Option<&Value>) -> Result<(), OperationError> {
    let bytes = detail.map_or(0, |d| d.to_string().len());
    if bytes > MAX_PAYLOAD_BYTES {
        return Err(OperationError::invalid(
            "detail",
            format!("{bytes} bytes of JSON, more than the {MAX_PAYLOAD_BYTES} allowed"),
        ));
    }
    Ok(())
}

/// Returns expired leases to the queue every `interval` until the service
/// is dropped.
///
/// Every quarter of the claim TTL it also keeps alive the claims of the
/// operations in flight (queued or leased), for another claim TTL: a
/// claim must outlive its operation's wait in the queue and its run, or
/// the capacity it holds would be handed out again before the VM moves.
async fn sweep(inner: Weak<Inner>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut kept_alive = tokio::time::Instant::now();
    let mut retained: Option<tokio::time::Instant> = None;
    loop {
        ticker.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if retained.is_none_or(|at: tokio::time::Instant| at.elapsed() >= RETENTION_INTERVAL) {
            retained = Some(tokio::time::Instant::now());
            OperationsService {
                inner: inner.clone(),
            }
            .drop_old_finished()
            .await;
        }
        let keepalive_every = inner.placement.config().claim_ttl / 4;
        if kept_alive.elapsed() >= keepalive_every {
            kept_alive = tokio::time::Instant::now();
            OperationsService {
                inner: inner.clone(),
            }
            .keep_claims_alive()
            .await;
        }
        let service = OperationsService { inner };
        let slots: Vec<Arc<Slot>> = service
            .inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for slot in slots {
            let mut queue = slot.queue.lock().await;
            if queue.leased_len() == 0 {
                continue;
            }
            if let Err(e) = service
                .expire_locked(&slot, &mut queue, Timestamp::now())
                .await
            {
                tracing::warn!(error = %e, "could not return expired leases to the queue");
            }
        }
    }
}
