//! The placement service the API calls: one [`ClusterState`] per cluster
//! behind that cluster's lock, loaded from the store on first use, with
//! every change queued to the store under the lock and acknowledged before
//! the caller answers.
//!
//! **Concurrency.** Operations on one cluster run one at a time (oVirt's
//! per-cluster scheduling lock), so every decision sees every claim made
//! before it and no two decisions can hand out the same capacity; see
//! docs/architecture.md for why this beats optimistic concurrency here.
//! The lock is fair (first come, first served) and bounded both ways, as
//! the oVirt scheduler API asks:
//!
//! * a caller that cannot get the lock within `lock_timeout` is answered
//!   [`PlacementError::Busy`] (503) instead of queueing without end;
//! * a decision that has held the lock for `max_hold` starts no further
//!   pick and is answered [`PlaceError::HoldExceeded`] (503) with
//!   nothing claimed, so one huge or slow request cannot starve the rest.
//!   (A pick in progress finishes: unit calls are bounded by their own
//!   deadlines.)
//!
//! Held decisions take turns ([`super::turns`]): each is queued at its
//! cluster, and whichever request holds the lock decides every queued one
//! back to back, so a burst costs one lock hold and one hand-off.
//!
//! Different clusters have different locks and never wait on each other,
//! and [`super::fairness`] keeps one cluster's storm from taking the CPU
//! the others need: a decision is admitted (or refused 503 at once when its
//! cluster has too many in progress) and runs its units only with one of
//! its cluster's sandbox slots.
//!
//! **Delay and retry.** When a decision finds no host but some candidate
//! would hold the VM's memory once its pending claims resolve, the request
//! releases the lock, waits up to `retry_wait` for any claim of the
//! cluster to resolve (a confirm covered by a report, a release, an
//! expiry, a fresh report), and tries once more (oVirt's `RunVmDelayer`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedMutexGuard, oneshot};
use uuid::Uuid;

use super::balance::{self, BalanceFailure, BalanceJob, Balanced};
use super::claims::Claim;
use super::cluster::{Change, ClusterState, InventorySummary, UpdateResult};
use super::config::PlacementConfig;
use super::error::PlacementError;
use super::fairness::{Admission, Fairness};
use super::hosts::{HostInventory, HostUpdate};
use super::persist::{self, LoggedDecision, PersistError, Persister, Unqueued};
use super::place::{self, PlaceError};
use super::request::{HostsSource, PlaceJob};
use super::time::Timestamp;
use super::turns::{Decided, Recorder, Taken, Turn, Turns};
use crate::arrow_snapshot::LastBody;
use crate::pipeline::ReuseCache;
use crate::snapshot::Snapshot;
use crate::store::Store;

/// The held inventory of a cluster with some of its hosts named
/// ([`PlacementService::held_view`]).
pub struct HeldView {
    pub inventory: sandpiper_model::Inventory,
    /// The named hosts the inventory holds, as indices of `inventory`.
    pub candidates: Vec<u32>,
    /// The names it does not hold.
    pub unknown: Vec<String>,
}

/// The placement service; cloning shares it.
#[derive(Clone)]
pub struct PlacementService {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    persister: Persister,
    config: PlacementConfig,
    clusters: Mutex<HashMap<Uuid, Arc<Slot>>>,
    fairness: Fairness,
}

/// One cluster: its state (`None` until loaded), its held decisions
/// waiting for a turn, a signal raised whenever one of its claims
/// resolves, and what its inline decisions keep: per-host answers and
/// the last compact body's columns.
struct Slot {
    state: Arc<tokio::sync::Mutex<Option<ClusterState>>>,
    turns: Turns,
    resolved: Notify,
    /// Per-host units' answers from the cluster's decisions over hosts
    /// sent inline, reused for hosts sent again unchanged. Apart from the
    /// held state's: inline decisions do not take the cluster's lock, and
    /// one that finds this in use decides whole rather than wait.
    inline_answers: Mutex<ReuseCache>,
    /// The last compact body an inline decision built, whose columns the
    /// next one takes where they are sent again unchanged; likewise apart
    /// and not waited for.
    inline_columns: Mutex<Option<LastBody>>,
}

/// `lock`, if no one holds it (a poisoned one recovered): what inline
/// decisions keep is a saving, never worth a wait.
fn if_free<T>(lock: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match lock.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

impl PlacementService {
    /// Starts the service, its store writer and its expiry sweeper on the
    /// current tokio runtime.
    pub fn start(store: Store, config: PlacementConfig) -> Self {
        let persister = Persister::start(store.clone(), config.retention);
        let inner = Arc::new(Inner {
            store,
            persister,
            config,
            clusters: Mutex::new(HashMap::new()),
            fairness: Fairness::new(config.fairness),
        });
        tokio::spawn(sweep(Arc::downgrade(&inner), config.sweep_interval));
        PlacementService { inner }
    }

    pub fn config(&self) -> &PlacementConfig {
        &self.inner.config
    }

    /// Admits a decision for the cluster (see [`super::fairness`]): every
    /// decision route calls it before reading its body, and keeps the
    /// admission until it answers.
    pub fn admit(&self, cluster_id: Uuid) -> Result<Admission, PlacementError> {
        Ok(self.inner.fairness.admit(cluster_id)?)
    }

    /// Replaces a cluster's inventory with a full snapshot.
    pub async fn replace_snapshot(
        &self,
        cluster_id: Uuid,
        generation: u64,
        snapshot: Snapshot,
    ) -> Result<InventorySummary, PlacementError> {
        let summary = self
            .locked(cluster_id, move |state, _| {
                let changes = state.replace_snapshot(generation, snapshot)?;
                Ok((state.summary(), changes, true))
            })
            .await?;
        crate::metrics::inventory_updated(cluster_id);
        Ok(summary)
    }

    /// Applies a batch of incremental updates.
    pub async fn apply_updates(
        &self,
        cluster_id: Uuid,
        updates: Vec<HostUpdate>,
    ) -> Result<(Vec<UpdateResult>, InventorySummary), PlacementError> {
        let (results, summary) = self
            .locked(cluster_id, move |state, _| {
                let (results, changes) = state.apply_updates(updates)?;
                let any = results.iter().any(|r| r.outcome == "applied");
                Ok(((results, state.summary()), changes, any))
            })
            .await?;
        if results.iter().any(|r| r.outcome == "applied") {
            crate::metrics::inventory_updated(cluster_id);
        }
        Ok((results, summary))
    }

    /// The cluster's inventory summary (expired claims dropped first).
    pub async fn summary(&self, cluster_id: Uuid) -> Result<InventorySummary, PlacementError> {
        self.locked(cluster_id, |state, now| {
            let (expired, changes) = state.expire(now);
            Ok((state.summary(), changes, !expired.is_empty()))
        })
        .await
    }

    /// Hosts `offset..offset + limit` of the cluster's held inventory with
    /// what they use, reported and claimed (expired claims dropped first),
    /// and how many hosts it holds in all.
    pub async fn held_hosts(
        &self,
        cluster_id: Uuid,
        offset: usize,
        limit: usize,
    ) -> Result<(usize, Vec<super::HostUsage>), PlacementError> {
        self.locked(cluster_id, move |state, now| {
            let (expired, changes) = state.expire(now);
            Ok((
                super::usage::page(state, offset, limit),
                changes,
                !expired.is_empty(),
            ))
        })
        .await
    }

    /// The cluster's live claims, oldest first.
    pub async fn claims(&self, cluster_id: Uuid) -> Result<Vec<Claim>, PlacementError> {
        self.locked(cluster_id, |state, now| {
            let (expired, changes) = state.expire(now);
            let mut claims: Vec<Claim> = state.claims().iter().cloned().collect();
            claims.sort_by(|a, b| (a.created_at, &a.vm_id).cmp(&(b.created_at, &b.vm_id)));
            Ok((claims, changes, !expired.is_empty()))
        })
        .await
    }

    /// Confirms a VM's claim (see [`ClusterState::confirm`]).
    pub async fn confirm(
        &self,
        cluster_id: Uuid,
        vm_id: String,
        covered_from: Option<u64>,
    ) -> Result<Claim, PlacementError> {
        self.locked(cluster_id, move |state, now| {
            let (_, mut changes) = state.expire(now);
            let (claim, more) = state.confirm(&vm_id, covered_from)?;
            let resolved = more
                .iter()
                .any(|c| matches!(c, Change::ClaimDeleted { .. }));
            changes.extend(more);
            Ok((claim, changes, resolved))
        })
        .await
    }

    /// Keeps the pending claims of `vm_ids` alive for another claim TTL
    /// from now: their operations are still queued or leased
    /// (`crate::operations`). Returns how many were extended.
    pub async fn extend_claims(
        &self,
        cluster_id: Uuid,
        vm_ids: Vec<String>,
    ) -> Result<usize, PlacementError> {
        let ttl = self.inner.config.claim_ttl;
        self.locked(cluster_id, move |state, now| {
            let (extended, changes) = state.extend_claims(&vm_ids, now, now.after(ttl));
            Ok((extended, changes, false))
        })
        .await
    }

    /// Releases a VM's claim.
    pub async fn release(&self, cluster_id: Uuid, vm_id: String) -> Result<Claim, PlacementError> {
        self.locked(cluster_id, move |state, now| {
            let (_, mut changes) = state.expire(now);
            let (claim, more) = state.release(&vm_id)?;
            changes.extend(more);
            Ok((claim, changes, true))
        })
        .await
    }

    /// The held inventory with every live claim applied (see
    /// [`ClusterState::held_snapshot`]), for a balance decision over it,
    /// and `candidates` resolved against it.
    async fn held_snapshot(
        &self,
        cluster_id: Uuid,
        candidates: Option<Vec<String>>,
    ) -> Result<(sandpiper_model::Inventory, Option<Vec<u32>>), PlacementError> {
        self.locked(cluster_id, move |state, now| {
            if !state.has_inventory() {
                return Err(PlacementError::NoInventory { cluster_id });
            }
            let (inventory, candidates, changes) =
                state.held_snapshot(now, candidates.as_deref())?;
            let resolved = !changes.is_empty();
            Ok(((inventory, candidates), changes, resolved))
        })
        .await
    }

    /// Runs a balancing round for a decision already admitted: the one
    /// entry point of a balance decision, whichever source its hosts come
    /// from. Over the held inventory the cluster is locked only while its
    /// snapshot (claims applied) is taken; the balance unit and the
    /// schedule of its proposal run unlocked, with one of the cluster's
    /// sandbox slots, and claim nothing.
    pub async fn balance_admitted(
        &self,
        cluster_id: Uuid,
        job: BalanceJob,
        admission: &Admission,
    ) -> Result<Balanced, PlacementError> {
        let held = match job.source {
            HostsSource::Inline(_) => None,
            HostsSource::Held => Some(
                self.held_snapshot(cluster_id, job.candidates.clone())
                    .await
                    .map_err(|e| match e {
                        // The candidates name hosts the inventory lacks.
                        PlacementError::Invalid(e) => PlacementError::Place(PlaceError::Invalid(e)),
                        e => e,
                    })?,
            ),
        };
        admission
            .run(move || balance::run(job, held))
            .await
            .map_err(|e| PlacementError::Task(e.to_string()))?
            .map_err(|e| match e {
                BalanceFailure::Place(e) => PlacementError::Place(e),
                BalanceFailure::Balance(e) => PlacementError::Balance(e),
            })
    }

    /// The held inventory as a decision over it sees it (every live claim
    /// counted as usage), for a front door that names its candidate hosts
    /// (the kube-scheduler extender, `crate::extender`): `names` split into
    /// the indices of the hosts the inventory holds, in the order given and
    /// without repeats, and the names it does not hold. Claims nothing; the
    /// cluster is locked only while the snapshot is taken, as for a
    /// balancing round.
    pub async fn held_view(
        &self,
        cluster_id: Uuid,
        names: Vec<String>,
    ) -> Result<HeldView, PlacementError> {
        self.locked(cluster_id, move |state, now| {
            if !state.has_inventory() {
                return Err(PlacementError::NoInventory { cluster_id });
            }
            let mut seen = std::collections::HashSet::new();
            let (known, unknown): (Vec<String>, Vec<String>) = names
                .into_iter()
                .filter(|name| seen.insert(name.clone()))
                .partition(|name| state.hosts().get(name).is_some());
            let (inventory, candidates, changes) = state.held_snapshot(now, Some(&known))?;
            let resolved = !changes.is_empty();
            let view = HeldView {
                inventory,
                candidates: candidates.unwrap_or_default(),
                unknown,
            };
            Ok((view, changes, resolved))
        })
        .await
    }

    /// A copy of what is held for the cluster — its hosts with their VMs,
    /// and its live claims — and the instant it was taken, for a
    /// simulation to replay a workload on (`crate::simulate`); the cluster
    /// itself is left as it was.
    pub async fn held_copy(
        &self,
        cluster_id: Uuid,
    ) -> Result<(HostInventory, Vec<Claim>, Timestamp), PlacementError> {
        // Read from the store, not from the cluster's state here: every
        // replica can answer (with several, another may own the cluster,
        // and a state loaded here would go stale), and a simulation never
        // takes the lock its cluster's decisions wait on. The store holds
        // every change that was acknowledged.
        let now = Timestamp::now();
        let state = persist::load(&self.inner.store, cluster_id).await?;
        if !state.has_inventory() {
            return Err(PlacementError::NoInventory { cluster_id });
        }
        let claims = state.claims().iter().cloned().collect();
        Ok((state.hosts().clone(), claims, now))
    }

    /// The ids of the cluster's held hosts, in inventory order (the
    /// periodic balance leaves out the ones with a migration in flight).
    pub async fn held_host_ids(&self, cluster_id: Uuid) -> Result<Vec<String>, PlacementError> {
        self.locked(cluster_id, |state, _| {
            let ids = state
                .hosts()
                .records()
                .iter()
                .map(|r| r.host.id.clone())
                .collect();
            Ok((ids, Vec::new(), false))
        })
        .await
    }

    /// The hosts at either end of a move the inventory does not show yet
    /// (see [`ClusterState::hosts_moving`]).
    pub async fn hosts_moving(&self, cluster_id: Uuid) -> Result<BTreeSet<String>, PlacementError> {
        self.locked(cluster_id, |state, now| {
            let (expired, changes) = state.expire(now);
            Ok((state.hosts_moving(), changes, !expired.is_empty()))
        })
        .await
    }

    /// A VM as its host's last report shows it, if any host reports it.
    pub async fn held_vm(
        &self,
        cluster_id: Uuid,
        vm_id: String,
    ) -> Result<Option<crate::snapshot::RunningVm>, PlacementError> {
        self.locked(cluster_id, move |state, _| {
            let vm = state
                .hosts()
                .records()
                .iter()
                .flat_map(|r| &r.vms)
                .find(|v| v.id == vm_id)
                .cloned();
            Ok((vm, Vec::new(), false))
        })
        .await
    }

    /// Whether the cluster has an inventory to decide on.
    pub async fn has_inventory(&self, cluster_id: Uuid) -> Result<bool, PlacementError> {
        self.locked(cluster_id, |state, _| {
            Ok((state.has_inventory(), Vec::new(), false))
        })
        .await
    }

    /// Forgets a deleted cluster's state (its rows go with the cluster).
    /// Forgets what this process holds of the cluster once it is settled:
    /// the decision in progress on it (if any) has queued its changes, and
    /// the store has applied (or refused) everything queued. What is then
    /// read from the store is all there is. A replica taking a cluster
    /// (back) over calls it before it decides for the cluster again
    /// (`crate::fleet`).
    pub async fn forget_settled(&self, cluster_id: Uuid) -> Result<(), PersistError> {
        let slot = self
            .inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&cluster_id);
        if let Some(slot) = slot {
            // Released only after its holder queued its changes.
            drop(slot.state.lock().await);
        }
        self.inner.store.flush().await
    }

    pub fn forget(&self, cluster_id: Uuid) {
        self.inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&cluster_id);
    }

    /// Places the job's instances: the one entry point of a schedule
    /// decision, whichever source its hosts come from.
    ///
    /// The decision goes to `answer`, the caller's part
    /// (see [`Recorder`]): it renders its answer and the decision's log
    /// entry while the cluster is still locked, and the log entry is stored
    /// with the claims the decision made. Returns once the store has both.
    ///
    /// Over the held inventory, the decision takes its turn at the cluster
    /// ([`super::turns`]). Over inline hosts, one pick over exactly those
    /// hosts, without the cluster's lock (it reads and claims nothing
    /// held).
    pub async fn place<A: Send + 'static>(
        &self,
        cluster_id: Uuid,
        job: PlaceJob,
        answer: impl FnOnce(&Decided) -> (A, Option<LoggedDecision>) + Send + 'static,
    ) -> Result<(Decided, A), PlacementError> {
        let admission = self.admit(cluster_id)?;
        self.place_admitted(cluster_id, job, &admission, answer)
            .await
    }

    /// [`PlacementService::place`] for a decision already admitted: its
    /// units run only with one of the cluster's sandbox slots.
    pub async fn place_admitted<A: Send + 'static>(
        &self,
        cluster_id: Uuid,
        mut job: PlaceJob,
        admission: &Admission,
        answer: impl FnOnce(&Decided) -> (A, Option<LoggedDecision>) + Send + 'static,
    ) -> Result<(Decided, A), PlacementError> {
        // The answer comes back beside the decision, whichever thread
        // decided it.
        let (answered, mut answer_rx) = oneshot::channel();
        let record: Recorder = Box::new(move |decided| {
            let (text, logged) = answer(decided);
            let _ = answered.send(text);
            logged
        });
        let mut answered = move |decided: Decided| {
            let answer = answer_rx
                .try_recv()
                .map_err(|_| PlacementError::Task("a decision was not answered".to_owned()))?;
            Ok((decided, answer))
        };
        if let HostsSource::Inline(inline) = std::mem::replace(&mut job.source, HostsSource::Held) {
            let persister = self.inner.persister.clone();
            let cores = admission.lender();
            let slot = self.slot(cluster_id);
            let reuse = self.inner.config.reuse_answers;
            let reuse_answers = reuse && job.policy.has_per_host_units();
            let (decided, ack) = admission
                .run(move || {
                    let mut last = reuse.then(|| if_free(&slot.inline_columns)).flatten();
                    let columns_kept = last.is_some() && inline.is_compact();
                    let cluster = inline
                        .build_reusing(last.as_deref_mut())
                        .map_err(place::PlaceError::InvalidSnapshot)?;
                    drop(last);
                    let mut kept = reuse_answers
                        .then(|| if_free(&slot.inline_answers))
                        .flatten();
                    let outcome = place::over_cluster(
                        cluster,
                        &job.request,
                        &job.policy,
                        &job.params,
                        Some(&cores),
                        kept.as_deref_mut().map(|cache| place::InlineReuse {
                            cache,
                            columns_kept,
                        }),
                    )?;
                    drop(kept);
                    let decided = Decided {
                        outcome,
                        waited: None,
                    };
                    let logged = record(&decided);
                    let ack = Unqueued::new(cluster_id, Vec::new(), &persister).queue(logged);
                    Ok::<_, PlacementError>((decided, ack))
                })
                .await
                .map_err(|e| PlacementError::Task(e.to_string()))??;
            ack.wait().await?;
            return answered(decided);
        }
        let job = Arc::new(job);
        let slot = self.slot(cluster_id);
        // Registered before the first attempt, so that a claim resolved
        // between the attempt and the wait is not missed.
        let resolved = slot.resolved.notified();
        tokio::pin!(resolved);
        resolved.as_mut().enable();

        let retry_wait = self.inner.config.retry_wait;
        let may_wait = !retry_wait.is_zero() && !job.dry_run;
        let record = match self
            .attempt(cluster_id, &job, may_wait, None, record, admission)
            .await?
        {
            Taken::Decided { decided, ack } => {
                ack.wait().await?;
                return answered(decided);
            }
            Taken::Retry { ack, record } => {
                ack.wait().await?;
                record
            }
        };
        let started = Instant::now();
        let _ = tokio::time::timeout(retry_wait, resolved).await;
        let waited = Some(started.elapsed());
        match self
            .attempt(cluster_id, &job, false, waited, record, admission)
            .await?
        {
            Taken::Decided { decided, ack } => {
                ack.wait().await?;
                answered(decided)
            }
            Taken::Retry { .. } => Err(PlacementError::Task(
                "a final attempt asked to be retried".to_owned(),
            )),
        }
    }

    /// One attempt: queues the decision as a turn at its cluster and waits
    /// until a holder of the cluster's lock (this request, or one queued
    /// before it) has taken it, or answers [`PlacementError::Busy`] if none
    /// did within the lock timeout. With `may_wait`, an attempt that placed
    /// nothing, found no host, and would find one once pending claims
    /// resolve answers [`Taken::Retry`]; the caller waits and tries again.
    async fn attempt(
        &self,
        cluster_id: Uuid,
        job: &Arc<PlaceJob>,
        may_wait: bool,
        waited: Option<Duration>,
        record: Recorder,
        admission: &Admission,
    ) -> Result<Taken, PlacementError> {
        let slot = self.slot(cluster_id);
        let (reply, mut taken) = oneshot::channel();
        let id = slot.turns.push(|id| Turn {
            id,
            job: Arc::clone(job),
            may_wait,
            waited,
            record,
            reply,
        });
        let timeout = self.inner.config.lock_timeout;
        let gave_up = tokio::time::sleep(timeout);
        tokio::pin!(gave_up);
        // Set once a holder has started this turn: only its answer is
        // awaited then.
        let mut started = false;
        loop {
            tokio::select! {
                biased;
                answer = &mut taken => {
                    return answer.map_err(|_| {
                        PlacementError::Task("the decision's task ended without answering".to_owned())
                    })?;
                }
                guard = Arc::clone(&slot.state).lock_owned(), if !started => {
                    if let Err(e) = self.take_turns(cluster_id, &slot, guard, admission).await {
                        if slot.turns.withdraw(id) {
                            return Err(e);
                        }
                        started = true;
                    }
                }
                () = &mut gave_up, if !started => {
                    if slot.turns.withdraw(id) {
                        return Err(PlacementError::Busy { cluster_id, waited: timeout });
                    }
                    started = true;
                }
            }
        }
    }

    /// With the cluster's lock: loads its state if this is its first use,
    /// then hands lock and queue to a task on the blocking pool, which
    /// decides the queued turns and unlocks. Not awaited: this request's
    /// own answer comes through its turn like every other's, as soon as it
    /// is decided, not when the last turn of the hold is.
    async fn take_turns(
        &self,
        cluster_id: Uuid,
        slot: &Arc<Slot>,
        guard: OwnedMutexGuard<Option<ClusterState>>,
        admission: &Admission,
    ) -> Result<(), PlacementError> {
        let mut guard = self.loaded(cluster_id, guard).await?;
        if slot.turns.is_empty() {
            // Every turn queued so far was taken by the previous holder; a
            // turn queued after this has its requester waiting for the lock.
            return Ok(());
        }
        // The sandbox slot after the lock, so a slot is never held idle by
        // a decision queued for the lock; held by the task until it ends.
        let permit = admission.sandbox().await;
        let cores = admission.lender();
        let persister = self.inner.persister.clone();
        let config = self.inner.config;
        let slot = Arc::clone(slot);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let resolved = match guard.as_mut() {
                Some(state) => slot
                    .turns
                    .take(cluster_id, state, &config, &persister, &cores),
                None => false,
            };
            drop(guard);
            if resolved {
                slot.resolved.notify_waiters();
            }
        });
        Ok(())
    }

    fn slot(&self, cluster_id: Uuid) -> Arc<Slot> {
        let mut clusters = self
            .inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Arc::clone(clusters.entry(cluster_id).or_insert_with(|| {
            Arc::new(Slot {
                state: Arc::new(tokio::sync::Mutex::new(None)),
                turns: Turns::default(),
                resolved: Notify::new(),
                inline_answers: Mutex::new(ReuseCache::default()),
                inline_columns: Mutex::new(None),
            })
        }))
    }

    /// Takes the cluster's lock (loading its state on first use), or gives
    /// up after the lock timeout.
    async fn lock(
        &self,
        cluster_id: Uuid,
    ) -> Result<(Arc<Slot>, OwnedMutexGuard<Option<ClusterState>>), PlacementError> {
        let slot = self.slot(cluster_id);
        let timeout = self.inner.config.lock_timeout;
        let guard = tokio::time::timeout(timeout, Arc::clone(&slot.state).lock_owned())
            .await
            .map_err(|_| PlacementError::Busy {
                cluster_id,
                waited: timeout,
            })?;
        let guard = self.loaded(cluster_id, guard).await?;
        Ok((slot, guard))
    }

    /// The cluster's state, loaded from the store if this is its first use.
    async fn loaded(
        &self,
        cluster_id: Uuid,
        mut guard: OwnedMutexGuard<Option<ClusterState>>,
    ) -> Result<OwnedMutexGuard<Option<ClusterState>>, PlacementError> {
        if guard.is_none() {
            *guard = Some(persist::load(&self.inner.store, cluster_id).await?);
        }
        Ok(guard)
    }

    /// Runs `work` on the blocking pool with the cluster locked, queues its
    /// changes before unlocking, wakes waiters if it resolved claims, and
    /// waits for the changes to be stored.
    async fn locked<T: Send + 'static>(
        &self,
        cluster_id: Uuid,
        work: impl FnOnce(
            &mut ClusterState,
            Timestamp,
        ) -> Result<(T, Vec<Change>, bool), PlacementError>
        + Send
        + 'static,
    ) -> Result<T, PlacementError> {
        let (slot, mut guard) = self.lock(cluster_id).await?;
        let persister = self.inner.persister.clone();
        let (value, ack, resolved) = tokio::task::spawn_blocking(move || {
            let Some(state) = guard.as_mut() else {
                return Err(PlacementError::Task("cluster state not loaded".to_owned()));
            };
            let (value, changes, resolved) = work(state, Timestamp::now())?;
            state.observe(cluster_id);
            // Queued while the lock is held: the store sees changes in
            // the order they were made.
            let ack = Unqueued::new(cluster_id, changes, &persister).queue(None);
            drop(guard);
            Ok((value, ack, resolved))
        })
        .await
        .map_err(|e| PlacementError::Task(e.to_string()))??;
        if resolved {
            slot.resolved.notify_waiters();
        }
        ack.wait().await?;
        Ok(value)
    }
}

/// Drops expired claims of every loaded cluster now and then, storing the
/// deletions and waking requests that wait for claims to resolve. A busy
/// cluster is skipped: its next operation expires claims itself.
async fn sweep(inner: Weak<Inner>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let slots: Vec<(Uuid, Arc<Slot>)> = inner
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, slot)| (*id, Arc::clone(slot)))
            .collect();
        let now = Timestamp::now();
        for (cluster_id, slot) in slots {
            let Ok(mut guard) = Arc::clone(&slot.state).try_lock_owned() else {
                continue;
            };
            let Some(state) = guard.as_mut() else {
                continue;
            };
            if state.claims().next_expiry().is_none_or(|at| at > now) {
                continue;
            }
            let (expired, changes) = state.expire(now);
            state.observe(cluster_id);
            let ack = Unqueued::new(cluster_id, changes, &inner.persister).queue(None);
            drop(guard);
            if !expired.is_empty() {
                tracing::info!(%cluster_id, claims = expired.len(), "claims expired");
                slot.resolved.notify_waiters();
            }
            if let Err(e) = ack.wait().await {
                tracing::error!(%cluster_id, error = %e, "expired claims not deleted from the store");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::pipeline::{ParamValues, Policy};
    use crate::placement::place::PlaceOutcome;
    use crate::placement::request::{Mode, PlaceRequest};
    use crate::placement::test_store::{TestDb, backends, store_with_cluster};
    use crate::snapshot::{Host, VmSpec};
    use crate::test_units::native;
    use crate::unit::Unit;

    async fn service(db: &TestDb, lock_timeout: Duration) -> (PlacementService, Uuid) {
        let (store, cluster) = store_with_cluster(db).await;
        let config = PlacementConfig {
            lock_timeout,
            retry_wait: Duration::ZERO,
            ..PlacementConfig::default()
        };
        let service = PlacementService::start(store, config);
        let hosts = ["a", "b"]
            .iter()
            .map(|id| Host {
                id: (*id).to_owned(),
                metrics: [
                    ("memory_total_mib".to_owned(), 4096.0),
                    ("memory_free_mib".to_owned(), 4096.0),
                ]
                .into(),
                ..Host::default()
            })
            .collect();
        service
            .replace_snapshot(
                cluster,
                1,
                Snapshot {
                    hosts,
                    vms: Vec::new(),
                },
            )
            .await
            .expect("inventory");
        (service, cluster)
    }

    /// The Memory filter alone.
    fn memory_policy() -> Policy {
        Policy::builder()
            .filter(native("sandpiper-policy-memory"))
            .build()
            .expect("valid")
    }

    /// A filter that rejects nothing, slowly.
    fn slow() -> Arc<dyn Unit> {
        fn filter(
            _: &sandpiper_model::Inventory,
            _: &sandpiper_model::Request,
            _: &[u32],
        ) -> Vec<sandpiper_model::Rejection> {
            std::thread::sleep(Duration::from_millis(400));
            Vec::new()
        }
        Arc::new(sandpiper_guest::native::NativeUnit {
            info: sandpiper_model::UnitInfo {
                name: "Slow".to_owned(),
                description: String::new(),
                params: Vec::new(),
                score_order: sandpiper_model::ScoreOrder::LowerIsBetter,
                applies_to: Default::default(),
                per_host: false,
            },
            filter: Some(filter),
            score: None,
            balance: None,
        })
    }

    fn job(policy: &Policy, vm: &str, memory_mib: f64) -> PlaceJob {
        PlaceJob {
            policy: Arc::new(policy.clone()),
            params: ParamValues::new(),
            request: PlaceRequest {
                vm: VmSpec {
                    id: vm.to_owned(),
                    memory_mib,
                    ..VmSpec::default()
                },
                count: 1,
                mode: Mode::AllOrNothing,
                ..PlaceRequest::default()
            },
            source: HostsSource::Held,
            dry_run: false,
            decision_id: Uuid::new_v4(),
        }
    }

    /// Places the job with nothing to log.
    async fn place(
        service: &PlacementService,
        cluster: Uuid,
        job: PlaceJob,
    ) -> Result<PlaceOutcome, PlacementError> {
        let (decided, ()) = service.place(cluster, job, |_| ((), None)).await?;
        Ok(decided.outcome)
    }

    /// A log entry for `decided`, as the API would write one.
    fn entry(cluster: Uuid, job_id: Uuid, decided: &Decided) -> LoggedDecision {
        LoggedDecision {
            id: job_id,
            cluster_id: cluster,
            kind: crate::store::decisions::DecisionKind::Schedule,
            vm_id: None,
            host_id: None,
            answer: "{}".to_owned(),
            full: None,
            claims: decided
                .outcome
                .claims
                .iter()
                .map(|c| (c.vm_id.clone(), c.host_id.clone()))
                .collect(),
            request: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_decision_is_answered_under_its_lock_and_stored_with_its_log_entry() {
        for db in backends().await {
            let (service, cluster) = service(&db, Duration::from_millis(100)).await;
            let policy = memory_policy();
            let job = job(&policy, "v1", 1024.0);
            let id = job.decision_id;
            let state = Arc::clone(&service.slot(cluster).state);
            let (decided, locked) = service
                .place(cluster, job, move |decided| {
                    (state.try_lock().is_err(), Some(entry(cluster, id, decided)))
                })
                .await
                .expect("decided");
            assert!(locked, "the answer is made while the cluster is locked");
            assert_eq!(decided.outcome.claims.len(), 1);
            // Answered only once the store has the claim and the entry.
            let stored = persist::load(&service.inner.store, cluster)
                .await
                .expect("loads");
            assert_eq!(stored.claims().len(), 1);
            let mut conn = service.inner.store.read().await.expect("reads");
            let logged = conn.decision(id).await.expect("reads").expect("logged");
            assert_eq!(logged.cluster_id, cluster);
        }
    }

    /// A decision (VM `slow`) that holds the cluster for 400 ms, started.
    async fn hold_slowly(
        service: &PlacementService,
        cluster: Uuid,
    ) -> tokio::task::JoinHandle<Result<PlaceOutcome, PlacementError>> {
        let policy = Policy::builder().filter(slow()).build().expect("valid");
        let service = service.clone();
        let job = job(&policy, "slow", 1.0);
        let holder = tokio::spawn(async move { place(&service, cluster, job).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        holder
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn decisions_queued_behind_a_holder_are_taken_back_to_back_in_order() {
        for db in backends().await {
            let (service, cluster) = service(&db, Duration::from_secs(10)).await;
            let memory = memory_policy();
            let holder = hold_slowly(&service, cluster).await;
            // Queued while the slow decision holds the cluster, and then
            // left alone: polled once, so each is queued, and not again
            // until the holder is done. The holder decides them all.
            let mut queued: Vec<_> = (0..5)
                .map(|i| {
                    let job = job(&memory, &format!("v{i}"), 1024.0);
                    Box::pin(service.place(cluster, job, |_| (Instant::now(), None)))
                })
                .collect();
            for decision in &mut queued {
                let polled = tokio::time::timeout(Duration::from_millis(1), decision).await;
                assert!(polled.is_err(), "queued behind the holder");
            }
            assert!(holder.await.expect("joined").expect("placed").complete);
            let mut on_disk = 0;
            for _ in 0..100 {
                let stored = persist::load(&service.inner.store, cluster)
                    .await
                    .expect("loads");
                on_disk = stored.claims().len();
                if on_disk == 6 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert_eq!(on_disk, 6, "the holder decided every queued decision");
            let mut answered = Vec::new();
            for decision in queued {
                let (decided, at) = decision.await.expect("placed");
                assert!(decided.outcome.complete);
                answered.push(at);
            }
            assert!(answered.windows(2).all(|w| w[0] <= w[1]), "in order");
            assert_eq!(service.summary(cluster).await.expect("summary").claims, 6);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_decision_that_gave_up_or_was_cancelled_while_queued_claims_nothing() {
        for db in backends().await {
            let (service, cluster) = service(&db, Duration::from_millis(100)).await;
            let memory = memory_policy();
            let holder = hold_slowly(&service, cluster).await;
            // Past the lock timeout behind the slow decision: busy.
            let gave_up = place(&service, cluster, job(&memory, "late", 1024.0)).await;
            assert!(
                matches!(gave_up, Err(PlacementError::Busy { .. })),
                "{gave_up:?}"
            );
            // Cancelled while queued.
            let cancelled = {
                let service = service.clone();
                let job = job(&memory, "cancelled", 1024.0);
                tokio::spawn(async move { place(&service, cluster, job).await })
            };
            tokio::time::sleep(Duration::from_millis(20)).await;
            cancelled.abort();
            assert!(holder.await.expect("joined").expect("placed").complete);
            let claims = service.claims(cluster).await.expect("claims");
            let vms: Vec<&str> = claims.iter().map(|c| c.vm_id.as_str()).collect();
            assert_eq!(vms, ["slow"]);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_busy_cluster_answers_busy_after_the_lock_timeout() {
        for db in backends().await {
            let (service, cluster) = service(&db, Duration::from_millis(100)).await;
            let holder = hold_slowly(&service, cluster).await;
            let started = Instant::now();
            let waited = service.summary(cluster).await;
            assert!(
                matches!(waited, Err(PlacementError::Busy { .. })),
                "{waited:?}"
            );
            assert!(started.elapsed() < Duration::from_millis(350));
            let placed = holder.await.expect("joined").expect("placed");
            assert!(placed.complete);
            // Free again.
            assert_eq!(service.summary(cluster).await.expect("summary").claims, 1);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_decisions_never_overcommit() {
        for db in backends().await {
            let (service, cluster) = service(&db, Duration::from_secs(10)).await;
            let policy = memory_policy();
            // Two hosts of 4 GiB: eight 1 GiB VMs fit, the other 12 do not.
            let tasks: Vec<_> = (0..20)
                .map(|i| {
                    let service = service.clone();
                    let job = job(&policy, &format!("v{i}"), 1024.0);
                    tokio::spawn(async move { place(&service, cluster, job).await })
                })
                .collect();
            let mut placed = 0;
            for task in tasks {
                if task.await.expect("joined").expect("decided").complete {
                    placed += 1;
                }
            }
            assert_eq!(placed, 8);
            let summary = service.summary(cluster).await.expect("summary");
            assert_eq!((summary.claims, summary.pending.memory_mib), (8, 8192.0));
        }
    }
}
