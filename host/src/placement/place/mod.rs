//! Placing one VM, or `count` instances of it, over the held inventory, and
//! recording a claim for every instance placed; or one VM over hosts sent
//! inline ([`over_snapshot`]), which holds and claims nothing. Both give a
//! [`PlaceOutcome`]: where the hosts come from is an input, not a second
//! kind of decision.
//!
//! Here: the outcome types and the placement itself ([`ClusterState::place`]);
//! in `pass.rs` one pass over a view of the hosts, in `instances.rs` the
//! request's instance ids and candidate rows, in `once.rs` the filters that
//! run once per request.
//!
//! Each pick runs the policy through the ordinary pipeline over a snapshot
//! whose usage columns include every live claim (minus the claims of the
//! very VMs being placed: placing a VM again replaces its claim, so its old
//! claim must not count against it). For several instances, as Nova does:
//!
//! * after each pick the chosen host **virtually consumes** the VM's
//!   resources before the next pick, so the next pick sees it fuller;
//! * the next pick considers only the hosts that survived the previous
//!   one's filters — consuming resources never makes a host fit better, so
//!   nothing that could win is lost, and the filters do less work;
//! * filters the policy marks `run_once` (or the request names as **once
//!   per request**) run for the first instance only; later instances
//!   inherit their verdicts through the narrowed candidates (Nova's
//!   `run_filter_once_per_request`);
//! * a VM-scoped affinity group the VM belongs to gains each chosen host,
//!   so (anti-)affinity filters see earlier picks;
//! * **all-or-nothing** records no claim unless every instance was placed;
//!   **best-effort** records the claims of the instances placed before the
//!   first that could not be (identical instances after it would fail the
//!   same way).

pub mod fit;
mod inline;
mod instances;
mod once;
mod pass;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use sandpiper_model::{HostMetric, HostStatus};
use uuid::Uuid;

pub use self::inline::{InlineReuse, over_cluster, over_snapshot, pick_over, with_candidates};
use self::instances::instance_ids;
use self::once::{check_filter_names, policy_without};
use self::pass::{Pass, run_pass};
use super::claims::{Claim, ClaimState};
use super::cluster::{Change, ClusterState};
use super::columns::{Columns, Window};
use super::request::{Mode, PlaceRequest};
use super::resources::Resources;
use super::sample::{Sample, Sampling};
use super::time::Timestamp;
use crate::pipeline::{
    Decision, Lender, ParamValues, Policy, PolicyError, ScheduleError, only_declared,
};
use crate::snapshot::SnapshotError;

/// What the decision runs with besides the request.
#[derive(Clone, Debug)]
pub struct PlaceContext<'a> {
    pub policy: &'a Policy,
    /// The cluster's parameter overrides.
    pub params: &'a ParamValues,
    /// Id of the decision, recorded in every claim it makes.
    pub decision_id: Uuid,
    pub now: Timestamp,
    pub claim_ttl: Duration,
    /// When set, no new pick starts after this instant: the bound on how
    /// long one request holds the cluster.
    pub hold_deadline: Option<Instant>,
    /// Decide, but record no claim.
    pub dry_run: bool,
    /// How many hosts the first pick considers.
    pub sampling: Sampling,
    /// Whether per-host units' answers for unchanged hosts are reused
    /// from earlier decisions (`pipeline::schedule_reusing`).
    pub reuse_answers: bool,
    /// Lends the decision more cores (`pipeline::parallel`), or `None`.
    pub cores: Option<&'a dyn Lender>,
}

/// One instance's pick.
#[derive(Clone, Debug)]
pub struct Pick {
    pub vm_id: String,
    /// The chosen host's id; `None` when every candidate was rejected.
    pub host_id: Option<String>,
    pub decision: Decision,
    /// The specific hardware taken on the host, for a VM that needs some.
    pub hardware: Option<std::sync::Arc<crate::hardware::claim::HardwareClaim>>,
}

/// The result of a placement.
#[derive(Clone, Debug)]
pub struct PlaceOutcome {
    /// Every instance tried, in order; the last one failed unless
    /// `complete`.
    pub picks: Vec<Pick>,
    /// Instances not tried because an earlier one could not be placed.
    pub not_tried: Vec<String>,
    /// The claims recorded (none for an all-or-nothing request that failed).
    pub claims: Vec<Claim>,
    pub complete: bool,
    /// When not complete: some candidate would fit the VM's memory if its
    /// pending claims were resolved, so waiting for them may help (oVirt's
    /// delay-and-retry condition).
    pub pending_could_fit: bool,
    /// The window the first pick considered, when it was a sample.
    pub sample: Option<Sample>,
}

/// Why a placement could not be decided at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlaceError {
    /// The VM or a host list names hosts the inventory does not have.
    #[error(transparent)]
    Invalid(#[from] SnapshotError),
    /// The hosts sent inline, or the VM or a host list checked against
    /// them, cannot be used: with inline hosts the whole body is the
    /// snapshot.
    #[error(transparent)]
    InvalidSnapshot(SnapshotError),
    #[error("{0}")]
    BadRequest(String),
    /// The instance ids do not fit the request (as many as `count`, none
    /// empty, none twice): a rule between fields, which no schema states.
    #[error("invalid value for `{field}`: {message}")]
    Instances {
        field: &'static str,
        message: String,
    },
    /// The pipeline could not decide (a fail-closed filter failed, ...);
    /// boxed, being much larger than the other reasons.
    #[error("instance `{instance}`: {error}")]
    Schedule {
        instance: String,
        error: Box<ScheduleError>,
    },
    #[error("the policy without its once-per-request filters is not valid: {0}")]
    Policy(#[from] PolicyError),
    #[error(
        "the decision held the cluster for {} ms, more than the limit, after placing {placed} of {count} instances; nothing was claimed",
        held.as_millis()
    )]
    HoldExceeded {
        placed: usize,
        count: u32,
        held: Duration,
    },
    /// The held records could not be turned into columns: a bug.
    #[error("the held inventory cannot be built: {0}")]
    Inventory(SnapshotError),
}

impl ClusterState {
    /// Places the request's instances and records their claims. Expired
    /// claims are dropped first, so they never count.
    ///
    /// When the service samples (see [`Sampling`]) and the request names
    /// no candidates, the decision runs over the next window of hosts in
    /// rotation; if the window cannot take every instance (or the VM refers
    /// to hosts outside it), the decision is made again over every host, so
    /// sampling never turns "fits" into "does not fit".
    pub fn place(
        &mut self,
        request: &PlaceRequest,
        cx: &PlaceContext<'_>,
    ) -> Result<(PlaceOutcome, Vec<Change>), PlaceError> {
        let started = Instant::now();
        let ids = instance_ids(request)?;
        let (_, mut changes) = self.expire(cx.now);
        self.ensure_columns().map_err(PlaceError::Inventory)?;
        check_filter_names(cx.policy, &request.once_per_request)?;
        // The policy's own once-per-request filters, and the request's.
        let run_once: BTreeSet<String> = cx
            .policy
            .filters()
            .iter()
            .filter(|f| f.run_once)
            .map(|f| f.unit.info().name.clone())
            .collect();
        let later_policy: Option<std::borrow::Cow<'_, Policy>> = if ids.len() < 2 {
            None
        } else if request.once_per_request.is_subset(&run_once) {
            if run_once.is_empty() {
                None
            } else {
                // Built once per policy (compiling its parameter patterns),
                // not per request.
                let cell = cx.policy.without_run_once();
                if cell.get().is_none() {
                    let _ = cell.set(policy_without(cx.policy, &run_once)?);
                }
                cell.get().map(std::borrow::Cow::Borrowed)
            }
        } else {
            let mut once = request.once_per_request.clone();
            once.extend(run_once);
            Some(std::borrow::Cow::Owned(policy_without(cx.policy, &once)?))
        };
        let later_params = later_policy
            .as_ref()
            .map(|p| only_declared(cx.params, p.units()));
        let later = later_policy.as_deref().zip(later_params.as_ref());

        let sampling = if request.exhaustive || request.candidates.is_some() {
            Sampling::All
        } else {
            cx.sampling
        };
        let window = match self.columns.as_mut() {
            Some(columns) => {
                let hosts = columns.host_count();
                let size = sampling.window(hosts);
                if size < hosts && size > 0 {
                    let count = hosts / size;
                    let index = self.next_window % count;
                    self.next_window = (index + 1) % count;
                    let window = columns
                        .window(self.hosts.records(), index, count)
                        .map_err(PlaceError::Inventory)?;
                    Some((window, (index, count)))
                } else {
                    None
                }
            }
            None => None,
        };
        let Some(columns) = self.columns.as_ref() else {
            return Err(PlaceError::BadRequest("no inventory".to_owned()));
        };
        // The request's VMs that hold a claim, which this decision replaces
        // and must not count against itself. A VM placed for the first
        // time holds none, and with nothing to leave out each host's
        // claimed sum is read as kept instead of its claims being searched
        // for the request's VMs (a string search per claimed host of every
        // window: 1.4 % of the server's samples over HTTP, session 44's
        // profile in docs/performance.md).
        let except: BTreeSet<String> = ids
            .iter()
            .filter(|vm| self.claims.get(vm).is_some())
            .cloned()
            .collect();
        let claims_held = &self.claims;
        // Later instances' policy has the same units, or fewer.
        let mut reuse =
            (cx.reuse_answers && cx.policy.has_per_host_units()).then_some(&mut self.reuse);
        // Every claimed host, computed only if a pass over every host runs.
        let all_pending = std::cell::OnceCell::new();
        let mut pass = |view: Option<&Window>| {
            let rows = view.map_or(0..columns.host_count(), |w| w.lo..w.hi);
            let hardware = ClusterState::pending_hardware(columns, claims_held, &except, rows);
            let (pending, vms) = match view {
                Some(w) => ClusterState::pending_in(columns, claims_held, &except, w.lo..w.hi),
                None => (
                    all_pending
                        .get_or_init(|| ClusterState::pending_rows(columns, claims_held, &except))
                        .clone(),
                    ClusterState::pending_vms(columns, claims_held, &except),
                ),
            };
            run_pass(Pass {
                columns,
                window: view,
                request,
                ids: &ids,
                pending,
                vms,
                hardware,
                first: (cx.policy, cx.params),
                later,
                hold_deadline: cx.hold_deadline,
                started,
                reuse: reuse.as_deref_mut(),
                cores: cx.cores,
            })
        };

        let mut sample = None;
        let mut result = None;
        if let Some((window, at)) = &window {
            let mut info = Sample::new(window, columns.host_count(), *at, sampling);
            if let Some(done) = pass(Some(window))?
                && done.complete
            {
                result = Some(done);
            } else {
                info.widen();
            }
            sample = Some(info);
        }
        let mut done = match result {
            Some(done) => done,
            None => pass(None)?.ok_or_else(|| {
                PlaceError::BadRequest(
                    "the request cannot be decided over the inventory".to_owned(),
                )
            })?,
        };
        if let Some(sample) = &sample {
            for pick in &mut done.picks {
                pick.decision.explain.considered = Some(sample.considered.clone());
            }
        }

        let pending_could_fit = !done.complete
            && waiting_could_help(
                columns,
                all_pending
                    .get_or_init(|| ClusterState::pending_rows(columns, claims_held, &except)),
                done.failed_over.as_deref(),
                done.resources.memory_mib,
            );
        let keep = !cx.dry_run && (done.complete || request.mode == Mode::BestEffort);
        let mut claims = Vec::new();
        if keep {
            for (vm_id, row, stays, hardware) in done.placed {
                let Some(host_id) = columns.hosts().id(row as u32).map(str::to_owned) else {
                    continue;
                };
                if stays {
                    // The VM stays where it runs: nothing new is taken, and
                    // a claim it held elsewhere is obsolete.
                    if self.claims.remove(&vm_id).is_some() {
                        changes.push(Change::ClaimDeleted { vm_id });
                    }
                    continue;
                }
                let claim = Claim {
                    vm_id,
                    host_id,
                    resources: done.resources,
                    decision_id: cx.decision_id,
                    created_at: cx.now,
                    expires_at: cx.now.after(cx.claim_ttl),
                    state: ClaimState::Pending,
                    hardware,
                };
                self.claims.insert(claim.clone());
                changes.push(Change::ClaimPut(claim.clone()));
                claims.push(claim);
            }
        }
        let not_tried = ids[done.picks.len()..].to_vec();
        Ok((
            PlaceOutcome {
                picks: done.picks,
                not_tried,
                claims,
                complete: done.complete,
                pending_could_fit,
                sample,
            },
            changes,
        ))
    }
}

/// oVirt's delay condition: some up candidate has claims pending, and
/// without them its reported free memory plus swap would hold `memory_mib`.
fn waiting_could_help(
    columns: &Columns,
    pending: &HashMap<usize, Resources>,
    candidates: Option<&[u32]>,
    memory_mib: f64,
) -> bool {
    let allowed: Option<HashSet<u32>> = candidates.map(|c| c.iter().copied().collect());
    pending.iter().any(|(&row, claimed)| {
        let candidate = allowed
            .as_ref()
            .is_none_or(|set| set.contains(&(row as u32)));
        let free = columns.reported(HostMetric::MemoryFreeMib, row)
            + columns.reported(HostMetric::SwapFreeMib, row).max(0.0);
        candidate
            && claimed.memory_mib > 0.0
            && columns.status(row) == HostStatus::Up
            && free >= memory_mib
    })
}

#[cfg(test)]
mod tests;
