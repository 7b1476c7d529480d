//! Held decisions taking turns at their cluster. A request queues its
//! decision on the cluster and waits; whichever request holds the
//! cluster's lock decides every queued decision back to back on one
//! blocking thread, queues each one's claims and log entry to the store in
//! order, and hands each its outcome. A burst of requests costs one lock
//! hold and one hand-off to the blocking pool, not one of each per
//! decision (measured before: a fifth of a 500-host decision's hold was
//! thread hops and rendering its log entry on another thread).
//!
//! Semantics are those of one decision per lock hold: decisions run in
//! arrival order, each sees every claim made before it, and each has its
//! own `max_hold` from the moment its turn starts.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::cluster::ClusterState;
use super::config::PlacementConfig;
use super::error::PlacementError;
use super::persist::{Ack, LoggedDecision, Persister, Unqueued};
use super::place::{PlaceContext, PlaceOutcome};
use super::request::PlaceJob;
use super::time::Timestamp;
use crate::pipeline::Lender;

/// Most decisions one lock hold takes: past this, the holder lets go, so a
/// host report or a confirm waiting for the lock is not held up behind a
/// long stream (32 decisions of ~1 ms).
pub const MAX_TURNS_PER_HOLD: usize = 32;

/// A placement decided over the held inventory (or over hosts sent
/// inline): what the caller answers from.
pub struct Decided {
    pub outcome: PlaceOutcome,
    /// How long the request waited for pending claims before its retry.
    pub waited: Option<Duration>,
}

/// The caller's part of a decision, run right after it while its cluster is
/// still locked: the decision's log entry (`None`: a dry run, nothing to
/// log), stored in the same batch as the claims it made, in decision order.
/// The placement layer never learns what a log entry looks like.
pub type Recorder = Box<dyn FnOnce(&Decided) -> Option<LoggedDecision> + Send>;

/// One queued decision.
pub(super) struct Turn {
    pub id: u64,
    pub job: Arc<PlaceJob>,
    /// Whether a decision that placed nothing but could once pending
    /// claims resolve answers [`Taken::Retry`] instead of deciding.
    pub may_wait: bool,
    pub waited: Option<Duration>,
    pub record: Recorder,
    pub reply: oneshot::Sender<Result<Taken, PlacementError>>,
}

/// What a turn came to.
pub(super) enum Taken {
    /// Decided and recorded; `ack` says when the store has both.
    Decided { decided: Decided, ack: Ack },
    /// Nothing placed, and waiting for pending claims could help. The
    /// recorder comes back for the next attempt.
    Retry { ack: Ack, record: Recorder },
}

/// A cluster's queue of turns.
#[derive(Default)]
pub(super) struct Turns {
    queue: Mutex<(u64, VecDeque<Turn>)>,
}

impl Turns {
    /// Queues a turn built with its id.
    pub fn push(&self, turn: impl FnOnce(u64) -> Turn) -> u64 {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.0 += 1;
        let id = queue.0;
        queue.1.push_back(turn(id));
        id
    }

    /// Takes turn `id` back if no holder has started it: true if it was
    /// still queued (and now never runs).
    pub fn withdraw(&self, id: u64) -> bool {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        match queue.1.iter().position(|t| t.id == id) {
            Some(at) => queue.1.remove(at).is_some(),
            None => false,
        }
    }

    /// No turn is waiting: a holder that finds this has nothing to do
    /// (its own turn was taken by the holder before it).
    pub fn is_empty(&self) -> bool {
        let queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.1.is_empty()
    }

    fn next(&self) -> Option<Turn> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.1.pop_front()
    }

    /// Decides queued turns in order, up to [`MAX_TURNS_PER_HOLD`], over
    /// `state` (the caller holds its lock). Turns whose requester has gone
    /// are dropped undecided. True if some decision resolved a claim
    /// (requests waiting to retry are then woken).
    pub fn take(
        &self,
        cluster_id: Uuid,
        state: &mut ClusterState,
        config: &PlacementConfig,
        persister: &Persister,
        cores: &dyn Lender,
    ) -> bool {
        let mut resolved = false;
        let mut taken = 0;
        while taken < MAX_TURNS_PER_HOLD {
            let Some(turn) = self.next() else { break };
            if turn.reply.is_closed() {
                continue;
            }
            taken += 1;
            // The writer, storing the turn before this one, waits for this
            // one's writes to share its commit.
            let _coming = persister.expect();
            resolved |= take_turn(cluster_id, state, config, persister, cores, turn);
        }
        resolved
    }
}

/// Decides one turn and answers it; true if it resolved a claim.
fn take_turn(
    cluster_id: Uuid,
    state: &mut ClusterState,
    config: &PlacementConfig,
    persister: &Persister,
    cores: &dyn Lender,
    turn: Turn,
) -> bool {
    let Turn {
        job,
        may_wait,
        waited,
        record,
        reply,
        ..
    } = turn;
    if !state.has_inventory() {
        let _ = reply.send(Err(PlacementError::NoInventory { cluster_id }));
        return false;
    }
    let cx = PlaceContext {
        policy: &job.policy,
        params: &job.params,
        decision_id: job.decision_id,
        now: Timestamp::now(),
        claim_ttl: config.claim_ttl,
        hold_deadline: Some(Instant::now() + config.max_hold),
        dry_run: job.dry_run,
        sampling: config.sampling,
        reuse_answers: config.reuse_answers,
        cores: Some(cores),
    };
    let (outcome, changes) = match state.place(&job.request, &cx) {
        Ok(placed) => placed,
        Err(e) => {
            let _ = reply.send(Err(e.into()));
            return false;
        }
    };
    state.observe(cluster_id);
    let changes = Unqueued::new(cluster_id, changes, persister);
    let resolved = changes.resolves_a_claim();
    let taken = if may_wait
        && !outcome.complete
        && outcome.pending_could_fit
        && outcome.claims.is_empty()
    {
        Taken::Retry {
            ack: changes.queue(None),
            record,
        }
    } else {
        let decided = Decided { outcome, waited };
        let logged = record(&decided);
        Taken::Decided {
            ack: changes.queue(logged),
            decided,
        }
    };
    let _ = reply.send(Ok(taken));
    resolved
}
