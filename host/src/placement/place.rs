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
//! * filters the request names as **once per request** run for the first
//!   instance only; later instances inherit their verdicts through the
//!   narrowed candidates (Nova's `run_filter_once_per_request`);
//! * a VM-scoped affinity group the VM belongs to gains each chosen host,
//!   so (anti-)affinity filters see earlier picks;
//! * **all-or-nothing** records no claim unless every instance was placed;
//!   **best-effort** records the claims of the instances placed before the
//!   first that could not be (identical instances after it would fail the
//!   same way).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandpiper_guest::model::{GroupScope, HostMetric, HostStatus};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::claims::{Claim, ClaimState};
use super::cluster::{Change, ClusterState};
use super::columns::Columns;
use super::resources::Resources;
use super::time::Timestamp;
use crate::pipeline::{
    self, Decision, ParamValues, Policy, PolicyError, ScheduleError, ScheduleRequest,
};
use crate::snapshot::{Hints, SnapshotError, VmSpec, hint_pairs};
use crate::unit::Unit;

/// Most instances one request may place. Each instance is one run of the
/// policy with the cluster's lock held (about a millisecond at 10,000
/// hosts), so this bounds one request's hold to a fraction of a second;
/// larger bursts are several requests, which interleave with others'.
pub const MAX_INSTANCES_PER_REQUEST: u32 = 256;

/// How a multi-instance request treats an instance that cannot be placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every instance placed, or none (no claim is kept).
    #[default]
    AllOrNothing,
    /// The instances placed before the first failure keep their claims.
    BestEffort,
}

/// What to place, over the held inventory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlaceRequest {
    pub vm: VmSpec,
    /// Instances to place, at least 1.
    pub count: u32,
    /// One id per instance; when empty, a single instance is `vm.id` and
    /// several are `vm.id` with `-0`, `-1`, ... appended.
    pub instance_ids: Vec<String>,
    pub mode: Mode,
    /// Host ids the VM may go to, in order of preference among equals
    /// (every host when `None`); each must be in the inventory.
    pub candidates: Option<Vec<String>>,
    /// Host ids the VM must not go to; ids not in the inventory are ignored.
    pub exclude: Vec<String>,
    pub hints: Hints,
    /// Filters (by unit name) that run for the first instance only.
    pub once_per_request: BTreeSet<String>,
}

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
    pub fn place(
        &mut self,
        request: &PlaceRequest,
        cx: &PlaceContext<'_>,
    ) -> Result<(PlaceOutcome, Vec<Change>), PlaceError> {
        let started = Instant::now();
        let ids = instance_ids(request)?;
        let (_, mut changes) = self.expire(cx.now);
        self.ensure_columns().map_err(PlaceError::Inventory)?;
        let Some(columns) = self.columns.as_ref() else {
            return Err(PlaceError::BadRequest("no inventory".to_owned()));
        };
        let hosts = columns.hosts();
        let mut vm = request.vm.to_vm(hosts, "vm")?;
        let mut candidates = candidate_rows(columns, request)?;
        let except: BTreeSet<String> = ids.iter().cloned().collect();
        let mut pending = ClusterState::pending_rows(columns, &self.claims, &except);
        let resources = Resources::of_vm(&vm);
        let hints = hint_pairs(&request.hints);
        let later_policy = if ids.len() > 1 && !request.once_per_request.is_empty() {
            Some(policy_without(cx.policy, &request.once_per_request)?)
        } else {
            check_filter_names(cx.policy, &request.once_per_request)?;
            None
        };
        let later_params = later_policy
            .as_ref()
            .map(|p| only_declared(cx.params, units_of(p)));

        let mut picks: Vec<Pick> = Vec::with_capacity(ids.len());
        let mut placed: Vec<(String, u32)> = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            if i > 0
                && let Some(deadline) = cx.hold_deadline
                && Instant::now() >= deadline
            {
                return Err(PlaceError::HoldExceeded {
                    placed: placed.len(),
                    count: request.count.max(1),
                    held: started.elapsed(),
                });
            }
            let rows: Vec<(usize, Resources)> = pending.iter().map(|(&r, &p)| (r, p)).collect();
            let inventory = Arc::new(columns.with_pending(&rows));
            vm.id = id.clone();
            let (policy, params) = match (&later_policy, &later_params, i) {
                (Some(policy), Some(params), 1..) => (policy, params),
                _ => (cx.policy, cx.params),
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
                picks.push(Pick {
                    vm_id: id.clone(),
                    host_id: None,
                    decision,
                });
                break;
            };
            let survivors: HashSet<u32> = decision.ranked.iter().map(|r| r.host).collect();
            candidates = Some(match candidates {
                Some(list) => list.into_iter().filter(|h| survivors.contains(h)).collect(),
                None => (0..columns.host_count() as u32)
                    .filter(|h| survivors.contains(h))
                    .collect(),
            });
            if vm.current_host != Some(host) {
                pending.entry(host as usize).or_default().add(&resources);
            }
            for group in vm.groups.iter_mut().filter(|g| g.scope == GroupScope::Vms) {
                group.hosts.push(host);
            }
            placed.push((id.clone(), host));
            picks.push(Pick {
                vm_id: id.clone(),
                host_id: hosts.id(host).map(str::to_owned),
                decision,
            });
        }

        let complete = placed.len() == ids.len();
        let not_tried = ids[picks.len()..].to_vec();
        let pending_could_fit = !complete && {
            let failed_over = candidates.clone();
            let real = ClusterState::pending_rows(columns, &self.claims, &except);
            waiting_could_help(columns, &real, failed_over.as_deref(), resources.memory_mib)
        };
        let keep = !cx.dry_run && (complete || request.mode == Mode::BestEffort);
        let mut claims = Vec::new();
        if keep {
            for (vm_id, host) in placed {
                let stays = vm.current_host == Some(host);
                let Some(host_id) = hosts.id(host).map(str::to_owned) else {
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
                    resources,
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
        Ok((
            PlaceOutcome {
                picks,
                not_tried,
                claims,
                complete,
                pending_could_fit,
            },
            changes,
        ))
    }
}

/// The instance ids of a request, checked.
fn instance_ids(request: &PlaceRequest) -> Result<Vec<String>, PlaceError> {
    let count = request.count.max(1);
    if count > MAX_INSTANCES_PER_REQUEST {
        return Err(PlaceError::BadRequest(format!(
            "count {count} is above the limit of {MAX_INSTANCES_PER_REQUEST} instances per request"
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
    pending: &std::collections::HashMap<usize, Resources>,
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
        builder = builder.filter_with(Arc::clone(&step.unit), step.position, step.on_failure);
    }
    for step in policy.scores() {
        builder = builder.score(Arc::clone(&step.unit), step.factor);
    }
    if let Some(unit) = policy.balance_unit() {
        builder = builder.balance(Arc::clone(unit));
    }
    Ok(builder.build()?)
}

/// The values of `values` whose keys one of `units` declares.
fn only_declared<'a>(
    values: &ParamValues,
    units: impl IntoIterator<Item = &'a Arc<dyn Unit>>,
) -> ParamValues {
    let declared: BTreeSet<String> = units
        .into_iter()
        .flat_map(|u| u.info().params.iter().map(|p| p.name.clone()))
        .collect();
    values
        .iter()
        .filter(|(k, _)| declared.contains(k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Every unit of `policy`.
fn units_of(policy: &Policy) -> impl Iterator<Item = &Arc<dyn Unit>> {
    policy
        .filters()
        .iter()
        .map(|s| &s.unit)
        .chain(policy.scores().iter().map(|s| &s.unit))
        .chain(policy.balance_unit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::hosts::HostUpdate;
    use crate::snapshot::{Host, Snapshot};

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
}
