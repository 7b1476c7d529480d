//! Fairness between clusters: one cluster's storm of decisions must not
//! slow every other cluster down (issue #11).
//!
//! Two bounds, both per cluster:
//!
//! * **Decisions in progress.** A decision is *admitted* before its body is
//!   read and counts until it answers; a cluster with
//!   [`FairnessConfig::max_in_progress`] decisions in progress answers the
//!   next one 503 `cluster_busy` with `Retry-After` at once, rather than
//!   queueing without end (each queued request holds a connection, its
//!   body and, without this bound, a place in line for CPU).
//! * **Sandboxed work.** The CPU part of a decision (parsing the hosts,
//!   running the units) runs on tokio's blocking pool, which has hundreds
//!   of threads: without a bound, 64 decisions of one cluster whose units
//!   burn their whole fuel run as 64 threads on a few cores, and every
//!   other cluster's decision gets a 1/65 share of a core. Every decision's
//!   CPU work first takes one of its cluster's
//!   [`FairnessConfig::cluster_sandbox_slots`], then one of the server's
//!   [`FairnessConfig::sandbox_slots`] (one per core). The server-wide
//!   queue is first come, first served and each cluster has at most its
//!   own slots in it, so a hostile cluster holds at most its share of the
//!   cores and other clusters' decisions take turns with it.
//!
//! A permit is moved into the blocking task, so a client that hangs up does
//! not free a slot while its decision still runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use crate::pipeline::{Lender, Loan};

/// Decisions one cluster may have in progress (waiting for its lock or a
/// sandbox slot, or running) before further ones are answered 503 at once.
/// Issue #5's stress test runs sixteen engine threads against one cluster,
/// more than any engine sends (oVirt decides one VM per cluster at a time);
/// twice that leaves headroom while bounding what a storm can queue.
pub const DEFAULT_MAX_IN_PROGRESS: usize = 32;

/// The fairness settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairnessConfig {
    /// Decisions one cluster may have in progress.
    pub max_in_progress: usize,
    /// Decisions whose CPU work may run at once, server-wide.
    pub sandbox_slots: usize,
    /// Of those, how many one cluster may hold.
    pub cluster_sandbox_slots: usize,
}

impl FairnessConfig {
    /// The defaults for a machine with `cores` cores: one server-wide
    /// slot per core (more would only time-slice the same cores), and half
    /// of them, at least one, per cluster, so that a cluster that keeps
    /// its slots busy leaves the other half to the rest.
    pub fn for_cores(cores: usize) -> FairnessConfig {
        let cores = cores.max(1);
        FairnessConfig {
            max_in_progress: DEFAULT_MAX_IN_PROGRESS,
            sandbox_slots: cores,
            cluster_sandbox_slots: (cores / 2).max(1),
        }
    }
}

impl Default for FairnessConfig {
    fn default() -> Self {
        FairnessConfig::for_cores(
            std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(1),
        )
    }
}

/// A cluster has as many decisions in progress as it may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cluster {cluster_id} is busy: it already has {limit} decisions in progress; retry shortly"
)]
pub struct TooManyInProgress {
    pub cluster_id: Uuid,
    pub limit: usize,
}

/// The per-cluster bounds, shared by every decision route.
#[derive(Debug)]
pub struct Fairness {
    config: FairnessConfig,
    sandbox: Arc<Semaphore>,
    clusters: Arc<Mutex<HashMap<Uuid, Gate>>>,
}

/// One cluster's counters; dropped when it has nothing in progress.
#[derive(Debug, Clone)]
struct Gate {
    in_progress: usize,
    sandbox: Arc<Semaphore>,
}

/// A decision admitted for its cluster; it stops counting when dropped.
#[derive(Debug)]
pub struct Admission {
    cluster_id: Uuid,
    cluster_sandbox: Arc<Semaphore>,
    sandbox: Arc<Semaphore>,
    clusters: Arc<Mutex<HashMap<Uuid, Gate>>>,
}

/// The right to run one decision's CPU work; hold it for as long as the
/// work runs.
#[derive(Debug)]
pub struct SandboxPermit {
    _cluster: Option<OwnedSemaphorePermit>,
    _server: Option<OwnedSemaphorePermit>,
}

impl Fairness {
    pub fn new(config: FairnessConfig) -> Fairness {
        Fairness {
            config,
            sandbox: Arc::new(Semaphore::new(config.sandbox_slots.max(1))),
            clusters: Arc::default(),
        }
    }

    pub fn config(&self) -> &FairnessConfig {
        &self.config
    }

    /// Admits a decision for `cluster_id`, or refuses it at once when the
    /// cluster has as many in progress as it may.
    pub fn admit(&self, cluster_id: Uuid) -> Result<Admission, TooManyInProgress> {
        let mut clusters = lock(&self.clusters);
        let gate = clusters.entry(cluster_id).or_insert_with(|| Gate {
            in_progress: 0,
            sandbox: Arc::new(Semaphore::new(self.config.cluster_sandbox_slots.max(1))),
        });
        if gate.in_progress >= self.config.max_in_progress.max(1) {
            return Err(TooManyInProgress {
                cluster_id,
                limit: self.config.max_in_progress.max(1),
            });
        }
        gate.in_progress += 1;
        Ok(Admission {
            cluster_id,
            cluster_sandbox: Arc::clone(&gate.sandbox),
            sandbox: Arc::clone(&self.sandbox),
            clusters: Arc::clone(&self.clusters),
        })
    }

    /// Decisions `cluster_id` has in progress now.
    pub fn in_progress(&self, cluster_id: Uuid) -> usize {
        lock(&self.clusters)
            .get(&cluster_id)
            .map_or(0, |g| g.in_progress)
    }
}

fn lock(clusters: &Mutex<HashMap<Uuid, Gate>>) -> std::sync::MutexGuard<'_, HashMap<Uuid, Gate>> {
    clusters.lock().unwrap_or_else(|p| p.into_inner())
}

impl Admission {
    /// Waits for a sandbox slot of the cluster, then for one of the
    /// server's. In that order: a cluster's surplus decisions wait in its
    /// own queue and never stand in the server-wide one.
    pub async fn sandbox(&self) -> SandboxPermit {
        // The semaphores are never closed, so acquiring cannot fail; if it
        // ever did, running without the bound beats failing the decision.
        let cluster = Arc::clone(&self.cluster_sandbox).acquire_owned().await.ok();
        let server = Arc::clone(&self.sandbox).acquire_owned().await.ok();
        SandboxPermit {
            _cluster: cluster,
            _server: server,
        }
    }

    /// Runs `work` on the blocking pool once a sandbox slot is free; the
    /// slot is held by the task itself, until the work ends.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let permit = self.sandbox().await;
        tokio::task::spawn_blocking(move || {
            let value = work();
            drop(permit);
            value
        })
        .await
    }
}

impl Admission {
    /// What lends this decision more cores (`pipeline::parallel`): a
    /// sandbox slot of its cluster and one of the server's, taken only if
    /// both are free at that instant, so a decision never runs on more
    /// cores than its cluster may hold, and a decision waiting for a slot
    /// never waits behind a loan it could have had.
    pub fn lender(&self) -> SlotLender {
        SlotLender {
            cluster: Arc::clone(&self.cluster_sandbox),
            server: Arc::clone(&self.sandbox),
        }
    }
}

/// Lends a decision the sandbox slots nobody holds ([`Admission::lender`]).
#[derive(Debug)]
pub struct SlotLender {
    cluster: Arc<Semaphore>,
    server: Arc<Semaphore>,
}

impl Lender for SlotLender {
    fn lend(&self) -> Option<Loan> {
        let cluster = Arc::clone(&self.cluster).try_acquire_owned().ok()?;
        let server = Arc::clone(&self.server).try_acquire_owned().ok()?;
        Some(Loan::new((cluster, server)))
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut clusters = lock(&self.clusters);
        if let Some(gate) = clusters.get_mut(&self.cluster_id) {
            gate.in_progress = gate.in_progress.saturating_sub(1);
            // Nothing in progress holds or waits for its slots: forget the
            // cluster, so that the map only holds busy clusters.
            if gate.in_progress == 0 {
                clusters.remove(&self.cluster_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn fairness(max_in_progress: usize, slots: usize, per_cluster: usize) -> Fairness {
        Fairness::new(FairnessConfig {
            max_in_progress,
            sandbox_slots: slots,
            cluster_sandbox_slots: per_cluster,
        })
    }

    #[test]
    fn a_cluster_past_its_bound_is_refused_and_others_are_not() {
        let fairness = fairness(2, 2, 1);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let first = fairness.admit(a).expect("first");
        let _second = fairness.admit(a).expect("second");
        assert_eq!(
            fairness.admit(a).map(|_| ()),
            Err(TooManyInProgress {
                cluster_id: a,
                limit: 2
            })
        );
        let _other = fairness.admit(b).expect("another cluster is not affected");
        drop(first);
        let _third = fairness.admit(a).expect("a slot came free");
        assert_eq!(fairness.in_progress(a), 2);
    }

    #[tokio::test]
    async fn a_decision_borrows_only_slots_its_cluster_and_the_server_have_free() {
        // Three server-wide slots, two per cluster.
        let fairness = fairness(8, 3, 2);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let a1 = fairness.admit(a).expect("admitted");
        let _running = a1.sandbox().await;
        let lender = a1.lender();
        let loan = lender
            .lend()
            .expect("A's second slot and a server slot are free");
        assert!(lender.lend().is_none(), "A holds both of its slots");
        drop(loan);
        let loan = lender.lend().expect("the loan's slots came back");
        drop(loan);
        // B runs and borrows the last server slot: A has nothing to borrow.
        let b1 = fairness.admit(b).expect("admitted");
        let _b_running = b1.sandbox().await;
        let _b_loan = b1
            .lender()
            .lend()
            .expect("B's second slot and the last server slot");
        assert!(lender.lend().is_none(), "every server slot is held");
    }

    #[test]
    fn an_idle_cluster_is_forgotten() {
        let fairness = fairness(4, 2, 1);
        let a = Uuid::new_v4();
        drop(fairness.admit(a).expect("admitted"));
        assert!(lock(&fairness.clusters).is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_busy_cluster_holds_at_most_its_share_of_the_sandbox() {
        // Two server-wide slots, one per cluster: cluster A's second
        // decision waits for A's first, while B's runs beside it.
        let fairness = fairness(8, 2, 1);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let a1 = fairness.admit(a).expect("admitted");
        let a2 = fairness.admit(a).expect("admitted");
        let b1 = fairness.admit(b).expect("admitted");
        let held = a1.sandbox().await;
        let waiting = tokio::time::timeout(Duration::from_millis(100), a2.sandbox()).await;
        assert!(
            waiting.is_err(),
            "A's second decision must wait for its first"
        );
        let other = tokio::time::timeout(Duration::from_millis(1000), b1.sandbox()).await;
        assert!(other.is_ok(), "B must not wait for A");
        drop(held);
        let next = tokio::time::timeout(Duration::from_millis(1000), a2.sandbox()).await;
        assert!(next.is_ok(), "A's slot came free");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clusters_take_turns_however_many_decisions_they_queue() {
        // One server-wide slot. Cluster A queues four decisions, B one
        // after A's first: B's runs second, not fifth, because A's surplus
        // waits in A's own queue and only one of A's stands in the
        // server-wide one at a time.
        let fairness = Arc::new(fairness(8, 1, 1));
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let order = Arc::new(Mutex::new(Vec::new()));
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let admission = fairness.admit(a).expect("admitted");
            let order = Arc::clone(&order);
            tokio::spawn(async move {
                let _slot = admission.sandbox().await;
                order.lock().expect("order").push("a");
                let _ = first_tx.send(());
                let _ = go_rx.await;
            })
        };
        first_rx.await.expect("A's first runs");
        let mut waiting = Vec::new();
        for cluster in [a, a, a, b] {
            let admission = fairness.admit(cluster).expect("admitted");
            let order = Arc::clone(&order);
            let name = if cluster == a { "a" } else { "b" };
            waiting.push(tokio::spawn(async move {
                let _slot = admission.sandbox().await;
                order.lock().expect("order").push(name);
            }));
            // Each in line before the next is admitted.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = go_tx.send(());
        first.await.expect("first");
        for task in waiting {
            task.await.expect("task");
        }
        assert_eq!(*order.lock().expect("order"), ["a", "b", "a", "a", "a"]);
    }
}
