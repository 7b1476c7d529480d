//! Placing one VM, or `count` instances of it, over the held inventory, and
//! recording a claim for every instance placed.
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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandpiper_model::{GroupScope, HostMetric, HostStatus};
use uuid::Uuid;

use super::claims::{Claim, ClaimState};
use super::cluster::{Change, ClusterState};
use super::columns::{Columns, PendingVm, Window};
use super::request::{Mode, PlaceRequest};
use super::resources::Resources;
use super::sample::{Sample, Sampling};
use super::time::Timestamp;
use crate::inputs::MAX_INSTANCES_PER_REQUEST;
use crate::pipeline::{
    self, Decision, ParamValues, Policy, PolicyError, ScheduleError, ScheduleRequest, only_declared,
};
use crate::snapshot::{SnapshotError, hint_pairs};

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
}

/// One instance's pick.
#[derive(Clone, Debug)]
pub struct Pick {
    pub vm_id: String,
    /// The chosen host's id; `None` when every candidate was rejected.
    pub host_id: Option<String>,
    pub decision: Decision,
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
    #[error("{0}")]
    BadRequest(String),
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
        let except: BTreeSet<String> = ids.iter().cloned().collect();
        let claims_held = &self.claims;
        // Every claimed host, computed only if a pass over every host runs.
        let all_pending = std::cell::OnceCell::new();
        let pass = |view: Option<&Window>| {
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
                first: (cx.policy, cx.params),
                later,
                hold_deadline: cx.hold_deadline,
                started,
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
            for (vm_id, row, stays) in done.placed {
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

/// One pass of a placement: every instance in turn over one view of the
/// hosts (all of them, or a window), nothing recorded yet.
struct Pass<'a> {
    columns: &'a Columns,
    window: Option<&'a Window>,
    request: &'a PlaceRequest,
    ids: &'a [String],
    /// Claims by held row; each pick adds to it (virtual consumption).
    pending: HashMap<usize, Resources>,
    /// The claimed VMs on the hosts considered; each pick adds its
    /// instance, so later picks see it in the VM columns.
    vms: Vec<PendingVm<'a>>,
    first: (&'a Policy, &'a ParamValues),
    /// The policy and parameters of instances after the first, when some
    /// filters run once per request.
    later: Option<(&'a Policy, &'a ParamValues)>,
    hold_deadline: Option<Instant>,
    started: Instant,
}

/// What a pass decided.
struct Passed {
    picks: Vec<Pick>,
    /// (instance, held row, whether the VM stays on its current host).
    placed: Vec<(String, usize, bool)>,
    complete: bool,
    /// What one instance takes.
    resources: Resources,
    /// The held rows the failing pick considered (`None`: every host).
    failed_over: Option<Vec<u32>>,
}

/// Runs a pass. `Ok(None)` when the pass cannot be made over its window:
/// the VM refers to hosts outside it, or every host of it is excluded.
fn run_pass(pass: Pass<'_>) -> Result<Option<Passed>, PlaceError> {
    let Pass {
        columns,
        window,
        request,
        ids,
        mut pending,
        mut vms,
        first,
        later,
        hold_deadline,
        started,
    } = pass;
    let (hosts, offset) = match window {
        Some(w) => (w.hosts(), w.lo),
        None => (columns.hosts(), 0),
    };
    let mut vm = match (
        crate::inputs::to_vm_checked(&request.vm, hosts, "vm"),
        window,
    ) {
        (Ok(vm), _) => vm,
        (Err(_), Some(_)) => return Ok(None),
        (Err(e), None) => return Err(e.into()),
    };
    let mut candidates: Option<Vec<u32>> = match window {
        None => candidate_rows(columns, request)?,
        Some(w) => {
            let excluded: HashSet<&str> = request.exclude.iter().map(String::as_str).collect();
            let rows: Vec<u32> = (0..w.len() as u32)
                .filter(|&local| hosts.id(local).is_some_and(|id| !excluded.contains(id)))
                .collect();
            if rows.is_empty() {
                return Ok(None);
            }
            (!excluded.is_empty()).then_some(rows)
        }
    };
    let host_count = window.map_or(columns.host_count(), Window::len);
    let resources = Resources::of_vm(&vm);
    let hints = hint_pairs(&request.hints);
    let mut picks: Vec<Pick> = Vec::with_capacity(ids.len());
    let mut placed = Vec::new();
    let mut failed_over = None;
    for (i, id) in ids.iter().enumerate() {
        if i > 0
            && let Some(deadline) = hold_deadline
            && Instant::now() >= deadline
        {
            return Err(PlaceError::HoldExceeded {
                placed: placed.len(),
                count: ids.len() as u32,
                held: started.elapsed(),
            });
        }
        let rows: Vec<(usize, Resources)> = pending.iter().map(|(&r, &p)| (r, p)).collect();
        let inventory = Arc::new(match window {
            Some(w) => columns.window_with_pending(w, &rows, &vms),
            None => columns.with_pending(&rows, &vms),
        });
        vm.id = id.clone();
        let (policy, params) = match (later, i) {
            (Some(later), 1..) => later,
            _ => first,
        };
        let schedule_request = ScheduleRequest {
            vm: vm.clone(),
            hints: hints.clone(),
            candidates: candidates.clone(),
            params: params.clone(),
        };
        let decision =
            pipeline::schedule(policy, &inventory, &schedule_request).map_err(|error| {
                PlaceError::Schedule {
                    instance: id.clone(),
                    error: Box::new(error),
                }
            })?;
        let Some(host) = decision.chosen else {
            failed_over = candidates
                .as_ref()
                .map(|c| c.iter().map(|&h| h + offset as u32).collect());
            picks.push(Pick {
                vm_id: id.clone(),
                host_id: None,
                decision,
            });
            break;
        };
        if i + 1 < ids.len() {
            // Later instances consider only this pick's survivors, in
            // candidate order.
            let survivors: HashSet<u32> = decision.ranked.iter().map(|r| r.host).collect();
            candidates = Some(match candidates {
                Some(list) => list.into_iter().filter(|h| survivors.contains(h)).collect(),
                None => (0..host_count as u32)
                    .filter(|h| survivors.contains(h))
                    .collect(),
            });
        }
        let stays = vm.current_host == Some(host);
        let row = host as usize + offset;
        if !stays {
            pending.entry(row).or_default().add(&resources);
            vms.push(PendingVm {
                row,
                id: id.as_str(),
                resources,
            });
        }
        for group in vm.groups.iter_mut().filter(|g| g.scope == GroupScope::Vms) {
            group.hosts.push(host);
        }
        placed.push((id.clone(), row, stays));
        picks.push(Pick {
            vm_id: id.clone(),
            host_id: hosts.id(host).map(str::to_owned),
            decision,
        });
    }
    Ok(Some(Passed {
        complete: placed.len() == ids.len(),
        picks,
        placed,
        resources,
        failed_over,
    }))
}

/// The instance ids of a request, checked.
fn instance_ids(request: &PlaceRequest) -> Result<Vec<String>, PlaceError> {
    let count = request.count;
    if count == 0 || count > MAX_INSTANCES_PER_REQUEST {
        return Err(PlaceError::BadRequest(format!(
            "count {count} is outside 1 to {MAX_INSTANCES_PER_REQUEST} instances per request"
        )));
    }
    let ids: Vec<String> = if !request.instance_ids.is_empty() {
        if request.instance_ids.len() != count as usize {
            return Err(PlaceError::BadRequest(format!(
                "{} instance ids for count {count}",
                request.instance_ids.len()
            )));
        }
        request.instance_ids.clone()
    } else if count == 1 {
        vec![request.vm.id.clone()]
    } else {
        (0..count)
            .map(|i| format!("{}-{i}", request.vm.id))
            .collect()
    };
    let mut seen = HashSet::new();
    for id in &ids {
        if id.is_empty() {
            return Err(PlaceError::BadRequest(
                "a VM to place needs an id: its claim is keyed by it".to_owned(),
            ));
        }
        if !seen.insert(id.as_str()) {
            return Err(PlaceError::BadRequest(format!(
                "instance id `{id}` is given twice"
            )));
        }
    }
    Ok(ids)
}

/// The candidate rows: the whitelist (or every host) minus the blacklist.
fn candidate_rows(
    columns: &Columns,
    request: &PlaceRequest,
) -> Result<Option<Vec<u32>>, PlaceError> {
    let hosts = columns.hosts();
    let excluded: HashSet<u32> = request
        .exclude
        .iter()
        .filter_map(|id| hosts.index(id))
        .collect();
    let listed = match &request.candidates {
        Some(ids) => Some(hosts.resolve_all(ids, "candidates")?),
        None if excluded.is_empty() => None,
        None => Some((0..columns.host_count() as u32).collect()),
    };
    Ok(listed.map(|rows| {
        let mut seen = HashSet::new();
        rows.into_iter()
            .filter(|h| !excluded.contains(h) && seen.insert(*h))
            .collect()
    }))
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

/// Refuses once-per-request names that are not filters of the policy: a
/// typo would otherwise silently run the filter for every instance.
fn check_filter_names(policy: &Policy, names: &BTreeSet<String>) -> Result<(), PlaceError> {
    for name in names {
        if !policy.filters().iter().any(|f| &f.unit.info().name == name) {
            return Err(PlaceError::BadRequest(format!(
                "once_per_request names `{name}`, which is not a filter of the policy"
            )));
        }
    }
    Ok(())
}

/// `policy` without the filters named in `skip`, keeping the policy's
/// values of the parameters its remaining units declare.
fn policy_without(policy: &Policy, skip: &BTreeSet<String>) -> Result<Policy, PlaceError> {
    check_filter_names(policy, skip)?;
    let kept: Vec<_> = policy
        .filters()
        .iter()
        .filter(|step| !skip.contains(&step.unit.info().name))
        .collect();
    let units = kept
        .iter()
        .map(|s| &s.unit)
        .chain(policy.scores().iter().map(|s| &s.unit))
        .chain(policy.balance_unit());
    let mut builder = Policy::builder()
        .combination(policy.combination())
        .params(only_declared(policy.params(), units));
    for step in kept {
        builder = builder.filter_step(
            Arc::clone(&step.unit),
            step.position,
            step.on_failure,
            step.run_once,
        );
    }
    for step in policy.scores() {
        builder = builder.score_with(Arc::clone(&step.unit), step.factor, step.on_failure);
    }
    if let Some(unit) = policy.balance_unit() {
        builder = builder.balance(Arc::clone(unit));
    }
    Ok(builder.build()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{OnFailure, Position};
    use crate::placement::hosts::HostUpdate;
    use crate::snapshot::{Host, Snapshot, VmSpec};
    use crate::unit::Unit;

    /// The built-in policy's units, built natively from their source.
    fn policy() -> Policy {
        Policy::builder()
            .filter(Arc::new(sandpiper_policy_cpu::native_unit()))
            .filter(Arc::new(sandpiper_policy_memory::native_unit()))
            .score(
                Arc::new(sandpiper_policy_cpu_even_distribution::native_unit()),
                2,
            )
            .score(Arc::new(sandpiper_policy_even_memory::native_unit()), 1)
            .build()
            .expect("the built-in policy is valid")
    }

    fn host(id: &str, total: f64) -> Host {
        Host {
            id: id.to_owned(),
            metrics: [
                ("memory_total_mib", total),
                ("memory_free_mib", total),
                ("cpu_cores", 16.0),
                ("cpu_threads", 16.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
            ..Host::default()
        }
    }

    fn cluster(totals: &[(&str, f64)]) -> ClusterState {
        let mut state = ClusterState::new();
        state
            .replace_snapshot(
                1,
                Snapshot {
                    hosts: totals.iter().map(|(id, t)| host(id, *t)).collect(),
                    vms: Vec::new(),
                },
            )
            .expect("valid snapshot");
        state
    }

    fn vm(id: &str, memory: f64) -> VmSpec {
        VmSpec {
            id: id.to_owned(),
            memory_mib: memory,
            ..VmSpec::default()
        }
    }

    fn request(vm: VmSpec, count: u32, mode: Mode) -> PlaceRequest {
        PlaceRequest {
            vm,
            count,
            mode,
            ..PlaceRequest::default()
        }
    }

    fn place(
        state: &mut ClusterState,
        policy: &Policy,
        request: &PlaceRequest,
    ) -> Result<PlaceOutcome, PlaceError> {
        let params = ParamValues::new();
        let cx = PlaceContext {
            policy,
            params: &params,
            decision_id: Uuid::new_v4(),
            now: Timestamp(1_000),
            claim_ttl: Duration::from_secs(60),
            hold_deadline: None,
            dry_run: false,
            sampling: Sampling::Adaptive,
        };
        state.place(request, &cx).map(|(outcome, _)| outcome)
    }

    fn hosts_of(outcome: &PlaceOutcome) -> Vec<Option<&str>> {
        outcome.picks.iter().map(|p| p.host_id.as_deref()).collect()
    }

    #[test]
    fn each_decision_sees_the_claims_before_it() {
        let policy = policy();
        let mut state = cluster(&[("a", 4096.0), ("b", 4096.0)]);
        let first = place(
            &mut state,
            &policy,
            &request(vm("v1", 3072.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        let second = place(
            &mut state,
            &policy,
            &request(vm("v2", 3072.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        let third = place(
            &mut state,
            &policy,
            &request(vm("v3", 3072.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        let (a, b) = (hosts_of(&first)[0], hosts_of(&second)[0]);
        assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
        assert_eq!(hosts_of(&third), [None]);
        assert!(!third.complete && third.claims.is_empty());
        assert_eq!(state.claims().len(), 2);
        // No host fits; claims hold the memory, so waiting could help.
        assert!(third.pending_could_fit);
        let rejected: Vec<_> = third.picks[0].decision.explain.rejections().collect();
        assert!(
            rejected
                .iter()
                .any(|(unit, reason, _)| *unit == "Memory" && reason.contains("pending")),
            "{rejected:?}"
        );
    }

    #[test]
    fn instances_consume_before_the_next_pick() {
        let policy = policy();
        let mut state = cluster(&[("a", 8192.0), ("b", 3000.0)]);
        let outcome = place(
            &mut state,
            &policy,
            &request(vm("web", 2048.0), 4, Mode::AllOrNothing),
        )
        .expect("decided");
        assert!(outcome.complete, "{:?}", hosts_of(&outcome));
        // b holds one 2 GiB VM and a four: without consuming each pick
        // before the next, b (or a) would be picked past what it holds.
        let on_b = outcome.claims.iter().filter(|c| c.host_id == "b").count();
        assert!(on_b <= 1, "{:?}", hosts_of(&outcome));
        assert_eq!(outcome.claims.len(), 4);
        let ids: Vec<_> = outcome.claims.iter().map(|c| c.vm_id.as_str()).collect();
        assert_eq!(ids, ["web-0", "web-1", "web-2", "web-3"]);
    }

    #[test]
    fn all_or_nothing_claims_nothing_when_one_instance_does_not_fit() {
        let policy = policy();
        let mut state = cluster(&[("a", 4096.0), ("b", 2048.0)]);
        let outcome = place(
            &mut state,
            &policy,
            &request(vm("db", 2048.0), 4, Mode::AllOrNothing),
        )
        .expect("decided");
        assert!(!outcome.complete);
        assert_eq!(hosts_of(&outcome).last(), Some(&None));
        assert!(outcome.claims.is_empty() && state.claims().is_empty());
        // Nothing was pending before the request, so waiting cannot help.
        assert!(!outcome.pending_could_fit);

        let outcome = place(
            &mut state,
            &policy,
            &request(vm("db", 2048.0), 4, Mode::BestEffort),
        )
        .expect("decided");
        assert_eq!(outcome.claims.len(), 3);
        assert_eq!(outcome.not_tried, Vec::<String>::new());
        assert_eq!(state.claims().len(), 3);
    }

    #[test]
    fn placing_a_vm_again_replaces_its_claim() {
        let policy = policy();
        let mut state = cluster(&[("a", 4096.0), ("b", 4096.0)]);
        let first = place(
            &mut state,
            &policy,
            &request(vm("v", 4096.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        // The VM's own claim does not count against it: it still fits.
        let again = place(
            &mut state,
            &policy,
            &request(vm("v", 4096.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        assert!(first.complete && again.complete);
        assert_eq!(state.claims().len(), 1);
        assert_eq!(hosts_of(&first), hosts_of(&again));
    }

    #[test]
    fn candidates_and_exclusions_narrow_the_hosts() {
        let policy = policy();
        let mut state = cluster(&[("a", 4096.0), ("b", 4096.0), ("c", 4096.0)]);
        let mut req = request(vm("v", 1024.0), 2, Mode::AllOrNothing);
        req.candidates = Some(vec!["c".to_owned(), "b".to_owned()]);
        req.exclude = vec!["b".to_owned(), "zz".to_owned()];
        let outcome = place(&mut state, &policy, &req).expect("decided");
        assert_eq!(hosts_of(&outcome), [Some("c"), Some("c")]);
        req.candidates = Some(vec!["nope".to_owned()]);
        let err = place(&mut state, &policy, &req).map(|_| ()).unwrap_err();
        assert_eq!(err.to_string(), "candidates[0]: unknown host \"nope\"");
    }

    #[test]
    fn once_per_request_filters_must_be_filters_of_the_policy() {
        let policy = policy();
        let mut state = cluster(&[("a", 8192.0)]);
        let mut req = request(vm("v", 1024.0), 2, Mode::AllOrNothing);
        req.once_per_request = BTreeSet::from(["CPU".to_owned()]);
        let outcome = place(&mut state, &policy, &req).expect("decided");
        assert!(outcome.complete);
        // The later pick ran without the CPU filter.
        let later = &outcome.picks[1].decision.explain;
        assert_eq!(later.filters.len(), 1);
        assert_eq!(later.filters[0].unit, "Memory");
        req.once_per_request = BTreeSet::from(["Cpu".to_owned()]);
        assert!(matches!(
            place(&mut state, &policy, &req),
            Err(PlaceError::BadRequest(_))
        ));
    }

    #[test]
    fn a_run_once_filter_of_the_policy_runs_for_the_first_instance_only() {
        let cpu: Arc<dyn Unit> = Arc::new(sandpiper_policy_cpu::native_unit());
        let policy = Policy::builder()
            .filter_step(cpu, Position::Middle, OnFailure::FailClosed, true)
            .filter(Arc::new(sandpiper_policy_memory::native_unit()))
            .score(Arc::new(sandpiper_policy_even_memory::native_unit()), 1)
            .build()
            .expect("valid");
        let mut state = cluster(&[("a", 8192.0), ("b", 8192.0)]);
        let outcome = place(
            &mut state,
            &policy,
            &request(vm("v", 1024.0), 3, Mode::AllOrNothing),
        )
        .expect("decided");
        assert!(outcome.complete);
        let ran: Vec<Vec<&str>> = outcome
            .picks
            .iter()
            .map(|p| {
                p.decision
                    .explain
                    .filters
                    .iter()
                    .map(|f| f.unit.as_str())
                    .collect()
            })
            .collect();
        assert_eq!(ran, [vec!["CPU", "Memory"], vec!["Memory"], vec!["Memory"]]);
        // The policy without it was built once, and is shared by clones.
        assert!(policy.clone().without_run_once().get().is_some());
        // A single instance runs every filter.
        let outcome = place(
            &mut state,
            &policy,
            &request(vm("w", 1024.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        assert_eq!(outcome.picks[0].decision.explain.filters.len(), 2);
    }

    #[test]
    fn nova_default_runs_novas_once_per_request_filters_once() {
        let policies = crate::builtin::BuiltinPolicy::all().expect("the built-in policies parse");
        let nova = policies
            .iter()
            .find(|p| p.name == "nova_default")
            .expect("nova_default");
        let mut once: Vec<&str> = nova
            .filters
            .iter()
            .filter(|f| f.run_once)
            .map(|f| f.unit.as_str())
            .collect();
        once.sort();
        // Nova's filters with run_filter_once_per_request = True among the
        // policy's; RAM/CPU/disk and the server-group filters must see
        // every instance's consumption and group members.
        assert_eq!(
            once,
            [
                "AvailabilityZoneFilter",
                "ComputeCapabilitiesFilter",
                "ComputeFilter",
                "ImagePropertiesFilter"
            ]
        );
    }

    /// A filter that drops every host the VM columns say runs a VM: it
    /// sees claimed VMs only if they are in the VM columns.
    fn one_vm_per_host() -> Arc<dyn Unit> {
        fn filter(
            inventory: &sandpiper_model::Inventory,
            _: &sandpiper_model::Request,
            candidates: &[u32],
        ) -> Vec<sandpiper_model::Rejection> {
            let busy: HashSet<u32> = inventory.vm_hosts().iter().copied().collect();
            let hosts: Vec<u32> = candidates
                .iter()
                .copied()
                .filter(|h| busy.contains(h))
                .collect();
            vec![sandpiper_model::Rejection {
                reason: "runs a VM".to_owned(),
                hosts,
            }]
        }
        Arc::new(sandpiper_guest::native::NativeUnit {
            info: sandpiper_model::UnitInfo {
                name: "OneVmPerHost".to_owned(),
                description: String::new(),
                params: Vec::new(),
                score_order: sandpiper_model::ScoreOrder::LowerIsBetter,
            },
            filter: Some(filter),
            score: None,
            balance: None,
        })
    }

    #[test]
    fn claimed_vms_are_vms_on_their_host_for_the_units() {
        let policy = Policy::builder()
            .filter(one_vm_per_host())
            .filter(Arc::new(sandpiper_policy_memory::native_unit()))
            .build()
            .expect("valid");
        let mut state = cluster(&[("a", 8192.0), ("b", 8192.0)]);
        let first = place(
            &mut state,
            &policy,
            &request(vm("v1", 1024.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        let second = place(
            &mut state,
            &policy,
            &request(vm("v2", 1024.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        let (a, b) = (hosts_of(&first)[0], hosts_of(&second)[0]);
        assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
        // Both hosts run a claimed VM now.
        let third = place(
            &mut state,
            &policy,
            &request(vm("v3", 1024.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        assert_eq!(hosts_of(&third), [None]);
        // Placing v1 again does not see its own claim.
        let again = place(
            &mut state,
            &policy,
            &request(vm("v1", 1024.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        assert_eq!(hosts_of(&again), [a]);

        // The instances of one request see the earlier ones.
        let mut state = cluster(&[("a", 8192.0), ("b", 8192.0), ("c", 8192.0)]);
        let outcome = place(
            &mut state,
            &policy,
            &request(vm("web", 1024.0), 3, Mode::AllOrNothing),
        )
        .expect("decided");
        let mut hosts = hosts_of(&outcome);
        hosts.sort();
        assert_eq!(hosts, [Some("a"), Some("b"), Some("c")]);
    }

    /// A balance unit that proposes moving the VM called `big` to any
    /// other candidate.
    fn move_big() -> Arc<dyn Unit> {
        fn balance(
            inventory: &sandpiper_model::Inventory,
            request: &sandpiper_model::BalanceRequest,
        ) -> Option<sandpiper_model::Migration> {
            let ids = inventory.vm_text(sandpiper_model::VmText::Id);
            let vm = (0..inventory.vm_count()).find(|&i| ids.get(i) == "big")?;
            let source = inventory.vm_hosts()[vm];
            Some(sandpiper_model::Migration {
                vm: vm as u32,
                destinations: request
                    .candidates
                    .iter()
                    .copied()
                    .filter(|&h| h != source)
                    .collect(),
            })
        }
        Arc::new(sandpiper_guest::native::NativeUnit {
            info: sandpiper_model::UnitInfo {
                name: "MoveBig".to_owned(),
                description: String::new(),
                params: Vec::new(),
                score_order: sandpiper_model::ScoreOrder::LowerIsBetter,
            },
            filter: None,
            score: None,
            balance: Some(balance),
        })
    }

    #[test]
    fn a_balance_over_the_held_inventory_counts_its_claims() {
        let policy = Policy::builder()
            .filter(Arc::new(sandpiper_policy_memory::native_unit()))
            .score(Arc::new(sandpiper_policy_even_memory::native_unit()), 1)
            .balance(move_big())
            .build()
            .expect("valid");
        let mut state = ClusterState::new();
        state
            .replace_snapshot(
                1,
                Snapshot {
                    hosts: vec![host("a", 4096.0), host("b", 8192.0), host("c", 6144.0)],
                    vms: vec![crate::snapshot::RunningVm {
                        id: "big".to_owned(),
                        name: None,
                        host: "a".to_owned(),
                        memory_mib: 3072.0,
                        memory_guaranteed_mib: None,
                        vcpus: 1,
                        cpu_usage_percent: 0.0,
                        migratable: true,
                        highly_available: false,
                        hosted_engine: false,
                        pending: false,
                    }],
                },
            )
            .expect("valid");
        let balance = |state: &mut ClusterState| {
            let (inventory, candidates, _) =
                state.held_snapshot(Timestamp(1_000), None).expect("held");
            let inventory = Arc::new(inventory);
            let input = pipeline::BalanceInput {
                candidates,
                params: ParamValues::new(),
            };
            let decision = pipeline::balance(&policy, &inventory, &input).expect("decided");
            let destination = decision.destination.map(|h| {
                inventory
                    .host_text(sandpiper_model::HostText::Id)
                    .get(h as usize)
                    .to_owned()
            });
            let explain = serde_json::to_value(&decision.explain).expect("serialises");
            (inventory, destination, explain)
        };
        // Nothing claimed: b, with the most free memory, wins.
        let (inventory, destination, _) = balance(&mut state);
        assert_eq!(inventory.vm_count(), 1);
        assert_eq!(destination.as_deref(), Some("b"));

        // A claim takes most of b: the held balance sees it, as usage and
        // as a pending VM of b, and does not send `big` there.
        let mut req = request(vm("x", 6000.0), 1, Mode::AllOrNothing);
        req.candidates = Some(vec!["b".to_owned()]);
        let placed = place(
            &mut state,
            &Policy::builder()
                .filter(Arc::new(sandpiper_policy_memory::native_unit()))
                .build()
                .expect("valid"),
            &req,
        )
        .expect("decided");
        assert_eq!(hosts_of(&placed), [Some("b")]);
        let (inventory, destination, explain) = balance(&mut state);
        assert_eq!(inventory.vm_count(), 2);
        assert_eq!(inventory.vm_text(sandpiper_model::VmText::Id).get(1), "x");
        assert_eq!(
            inventory.vm_flag(sandpiper_model::VmFlag::Pending),
            [false, true]
        );
        assert_ne!(destination.as_deref(), Some("b"));
        let rejected = &explain["schedule"]["filters"][0]["rejected"][0];
        assert_eq!(rejected["hosts"], serde_json::json!(["b"]));
        assert!(
            rejected["reason"]
                .as_str()
                .is_some_and(|r| r.contains("6000 MiB pending")),
            "{rejected}"
        );
    }

    #[test]
    fn bad_counts_and_ids_are_refused() {
        let policy = policy();
        let mut state = cluster(&[("a", 8192.0)]);
        let mut req = request(
            vm("v", 1.0),
            MAX_INSTANCES_PER_REQUEST + 1,
            Mode::BestEffort,
        );
        assert!(matches!(
            place(&mut state, &policy, &req),
            Err(PlaceError::BadRequest(_))
        ));
        req.count = 2;
        req.instance_ids = vec!["x".to_owned(), "x".to_owned()];
        assert!(matches!(
            place(&mut state, &policy, &req),
            Err(PlaceError::BadRequest(_))
        ));
        req.instance_ids.clear();
        req.vm.id.clear();
        req.count = 1;
        assert!(matches!(
            place(&mut state, &policy, &req),
            Err(PlaceError::BadRequest(_))
        ));
    }

    #[test]
    fn a_dry_run_claims_nothing_and_expired_claims_never_count() {
        let policy = policy();
        let mut state = cluster(&[("a", 4096.0)]);
        let params = ParamValues::new();
        let mut cx = PlaceContext {
            policy: &policy,
            params: &params,
            decision_id: Uuid::nil(),
            now: Timestamp(0),
            claim_ttl: Duration::from_millis(100),
            hold_deadline: None,
            dry_run: true,
            sampling: Sampling::Adaptive,
        };
        let req = request(vm("v", 4096.0), 1, Mode::AllOrNothing);
        let (outcome, _) = state.place(&req, &cx).expect("decided");
        assert!(outcome.complete && state.claims().is_empty());
        cx.dry_run = false;
        state.place(&req, &cx).expect("decided");
        let other = request(vm("w", 4096.0), 1, Mode::AllOrNothing);
        let (full, _) = state.place(&other, &cx).expect("decided");
        assert!(!full.complete);
        cx.now = Timestamp(100);
        let (later, changes) = state.place(&other, &cx).expect("decided");
        assert!(later.complete);
        assert!(changes.contains(&Change::ClaimDeleted {
            vm_id: "v".to_owned()
        }));
    }

    #[test]
    fn a_host_report_patches_what_the_next_decision_sees() {
        let policy = policy();
        let mut state = cluster(&[("a", 4096.0), ("b", 4096.0)]);
        let mut full = host("a", 4096.0);
        full.metrics.insert("memory_free_mib".to_owned(), 0.0);
        state
            .apply_updates(vec![HostUpdate::Upsert {
                generation: 2,
                host: full,
                vms: None,
            }])
            .expect("valid");
        assert!(
            state.columns.is_some(),
            "a usage-only report patches in place"
        );
        let outcome = place(
            &mut state,
            &policy,
            &request(vm("v", 1024.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        assert_eq!(hosts_of(&outcome), [Some("b")]);
    }

    #[test]
    fn a_sampled_decision_rotates_and_widens_before_saying_no() {
        let policy = policy();
        // Hosts h0..h9 hold one 1 GiB VM each; h10..h19 hold none.
        let totals: Vec<(String, f64)> = (0..20)
            .map(|i| (format!("h{i}"), if i < 10 { 1024.0 } else { 512.0 }))
            .collect();
        let refs: Vec<(&str, f64)> = totals.iter().map(|(h, t)| (h.as_str(), *t)).collect();
        let mut state = cluster(&refs);
        let params = ParamValues::new();
        let cx = PlaceContext {
            policy: &policy,
            params: &params,
            decision_id: Uuid::nil(),
            now: Timestamp(0),
            claim_ttl: Duration::from_secs(60),
            hold_deadline: None,
            dry_run: false,
            sampling: Sampling::AtMost(4),
        };
        let mut chosen = Vec::new();
        for i in 0..10 {
            let req = request(vm(&format!("v{i}"), 1024.0), 1, Mode::AllOrNothing);
            let (outcome, _) = state.place(&req, &cx).expect("decided");
            let sample = outcome.sample.clone().expect("sampled");
            assert_eq!((sample.window, sample.eligible), (4, 20));
            // The explain record of every pick says what was considered.
            let considered = outcome.picks[0].decision.explain.considered.clone();
            if !sample.widened {
                assert!(
                    sample
                        .considered
                        .starts_with("considered 4 of 20 hosts (sampled window "),
                    "{}",
                    sample.considered
                );
            }
            assert_eq!(considered.as_deref(), Some(sample.considered.as_str()));
            chosen.push(outcome.picks[0].host_id.clone().expect("placed"));
        }
        chosen.sort();
        chosen.dedup();
        // Every VM found a host, each on its own: windows that held none
        // widened to the whole cluster.
        assert_eq!(chosen.len(), 10);
        let req = request(vm("last", 1024.0), 1, Mode::AllOrNothing);
        let (outcome, _) = state.place(&req, &cx).expect("decided");
        assert!(!outcome.complete);
        let sample = outcome.sample.clone().expect("sampled");
        assert!(sample.widened);
        assert!(sample.considered.starts_with("considered all 20 hosts"));
        assert_eq!(outcome.picks[0].decision.explain.candidates, 20);
        // An exhaustive request is not sampled.
        let mut req = request(vm("x", 1.0), 1, Mode::AllOrNothing);
        req.exhaustive = true;
        let (outcome, _) = state.place(&req, &cx).expect("decided");
        assert_eq!(outcome.sample, None);
        assert_eq!(outcome.picks[0].decision.explain.considered, None);
    }

    #[test]
    fn a_cluster_of_a_thousand_hosts_is_considered_whole_by_default() {
        let policy = policy();
        let names: Vec<String> = (0..1_001).map(|i| format!("h{i}")).collect();
        let totals: Vec<(&str, f64)> = names.iter().map(|h| (h.as_str(), 8192.0)).collect();
        let mut state = cluster(&totals[..1_000]);
        let outcome = place(
            &mut state,
            &policy,
            &request(vm("v", 1024.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        assert_eq!(outcome.sample, None);
        let explain = &outcome.picks[0].decision.explain;
        assert_eq!(
            (explain.candidates, explain.considered.as_deref()),
            (1_000, None)
        );

        // One host more, and the adaptive sample applies, and says so.
        let mut state = cluster(&totals);
        let outcome = place(
            &mut state,
            &policy,
            &request(vm("v", 1024.0), 1, Mode::AllOrNothing),
        )
        .expect("decided");
        let sample = outcome.sample.clone().expect("sampled");
        // 420 hosts asked for: two windows of about 500.
        assert_eq!(
            (sample.window, sample.eligible, sample.widened),
            (500, 1_001, false)
        );
        let explain = &outcome.picks[0].decision.explain;
        assert_eq!(explain.candidates, 500);
        let considered = explain
            .considered
            .as_deref()
            .expect("says what it considered");
        assert!(
            considered.starts_with(
                "considered 500 of 1001 hosts (sampled window 1 of 2: held hosts 0 to 499"
            ),
            "{considered}"
        );
        let json = serde_json::to_value(explain).expect("serialises");
        assert_eq!(json["considered"], considered);
    }
}
