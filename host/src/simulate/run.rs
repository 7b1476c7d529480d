//! The replay of one trace against one policy, on a private copy of a
//! cluster, through the real placement path: `ClusterState::place` (the
//! decision the server makes over a held inventory, with a claim per VM
//! placed), `ClusterState::confirm` and `apply_updates` (the engine
//! confirming the start and reporting the host with the VM on it, which
//! resolves the claim so nothing counts twice), and the periodic balance
//! as `rebalance::round` runs it (the balance unit over the held
//! inventory, then the proposal placed again between its host and the
//! destination, claiming the destination if it still wins).
//!
//! The simulator plays the engine's part, and only that: after each
//! start, stop or migration it reports the hosts touched, their usage
//! columns moved by the VM's resources exactly as a claim moves them
//! (`placement::resources::with_pending`, less the `*-pending` parts, since
//! the VM now runs). Nothing here decides where a VM goes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use sandpiper_model::{HostMetric, Inventory};
use uuid::Uuid;

use super::report::{HostPlacements, MAX_REFUSAL_REASONS, PolicyReport, Refusal, Sample, Spread};
use super::trace::{Event, Trace};
use crate::pipeline::{BalanceError, ParamValues, Policy, ScheduleError};
use crate::placement::balance::{self, BalanceFailure};
use crate::placement::resources::{Resources, host_cpus, with_pending};
use crate::placement::{
    BalanceJob, Claim, ClaimError, ClusterState, HostInventory, HostUpdate, HostsSource,
    InventoryError, PlaceContext, PlaceError, PlaceRequest, Sampling, Timestamp,
};
use crate::snapshot::metric_name;
use crate::snapshot::{Host, HostIndex, RunningVm, Snapshot, SnapshotError, VmSpec};
use crate::unit::Failed;

/// How often, in trace time, the policy's balance unit runs by default:
/// five minutes, within the range of oVirt's balancing interval (one
/// minute) and a typical engine's periodic rebalance.
pub const DEFAULT_BALANCE_EVERY_S: u64 = 300;

/// How often, in trace time, the cluster is sampled by default.
pub const DEFAULT_SAMPLE_EVERY_S: u64 = 300;

/// The most samples a replay takes: enough for a smooth chart, few enough
/// that a report stays a few megabytes at 8 policies.
pub const MAX_SAMPLES: u64 = 10_000;

/// The most balancing rounds a replay runs: each is one decision over the
/// whole cluster, as costly as an arrival.
pub const MAX_BALANCE_ROUNDS: u64 = 100_000;

/// The instant trace time 0 stands for when the cluster does not come
/// from a running server (2026-01-01T00:00:00Z): fixed, so that claims'
/// times, and so everything, are the same on every run.
pub const SIMULATED_EPOCH: Timestamp = Timestamp(1_767_225_600_000);

/// The units of the host metrics a running VM moves, as claims move them
/// ([`crate::placement::resources::PENDING_METRICS`]) but for the
/// `*-pending` parts: a VM the engine reports running is no longer
/// pending.
const RUNNING_METRICS: [HostMetric; 6] = [
    HostMetric::CpuUsagePercent,
    HostMetric::VcpusUsed,
    HostMetric::MemoryFreeMib,
    HostMetric::MemoryCommittedMib,
    HostMetric::VmCount,
    HostMetric::DiskFreeGib,
];

/// The metrics that may go below 0 in a report (overcommit); the others
/// stop at 0 (`snapshot::MAY_BE_NEGATIVE`).
fn may_be_negative(metric: HostMetric) -> bool {
    crate::snapshot::MAY_BE_NEGATIVE.contains(&metric_name(metric).as_str())
}

/// When the replay balances and samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intervals {
    /// Seconds of trace time between balancing rounds; 0: never.
    pub balance_every_s: u64,
    /// Seconds of trace time between samples (at least 1).
    pub sample_every_s: u64,
}

impl Default for Intervals {
    fn default() -> Self {
        Intervals {
            balance_every_s: DEFAULT_BALANCE_EVERY_S,
            sample_every_s: DEFAULT_SAMPLE_EVERY_S,
        }
    }
}

/// The cluster a replay starts from, copied for every policy.
#[derive(Clone, Debug)]
pub struct Start {
    pub hosts: HostInventory,
    /// Live claims of a held cluster: they count as usage until they
    /// expire in trace time.
    pub claims: Vec<Claim>,
    /// The instant trace time 0 stands for.
    pub now: Timestamp,
}

impl Start {
    /// A snapshot in the `{hosts, vms}` format, checked as the API checks
    /// inline hosts.
    pub fn from_snapshot(snapshot: Snapshot) -> Result<Start, SimulateError> {
        let mut state = ClusterState::new();
        state.replace_snapshot(1, snapshot)?;
        Ok(Start {
            hosts: state.hosts().clone(),
            claims: Vec::new(),
            now: SIMULATED_EPOCH,
        })
    }

    /// A held cluster's state at `now`, its claims included.
    pub fn from_held(state: &ClusterState, now: Timestamp) -> Start {
        Start {
            hosts: state.hosts().clone(),
            claims: state.claims().iter().cloned().collect(),
            now,
        }
    }

    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }
}

/// A policy to replay, assembled by the caller (the command line from the
/// built-in units, the API from the stored ones).
#[derive(Clone)]
pub struct Candidate {
    pub name: String,
    pub policy_id: Option<Uuid>,
    pub policy: Policy,
    pub params: ParamValues,
}

/// Why a replay could not run (not: a VM was refused, which the report
/// counts).
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("the cluster snapshot: {0}")]
    Snapshot(#[from] InventoryError),
    #[error("a host report the simulator made was refused (a bug): {0}")]
    Report(#[from] SnapshotError),
    #[error("a claim the simulator confirmed was gone (a bug): {0}")]
    Claim(#[from] ClaimError),
    /// Boxed, as the other large reasons: a replay's error is rare and
    /// its `Result` is on every step.
    #[error("policy `{policy}`: {error}")]
    Place {
        policy: String,
        error: Box<PlaceError>,
    },
    #[error("policy `{policy}`, balancing at {at_s} s: {error}")]
    Balance {
        policy: String,
        at_s: u64,
        error: Box<BalanceFailure>,
    },
    /// A unit hit its deadline because the machine starved it of CPU
    /// (`UnitError::Overloaded`). A simulation stops rather than count a
    /// refusal the machine's load made: its report must be a function of
    /// its inputs. Run it again when the machine is less busy.
    #[error("the machine was too busy for unit `{unit}` ({failed}); run the simulation again")]
    Overloaded { unit: String, failed: Box<Failed> },
    #[error("`{field}`: {message}")]
    Interval {
        field: &'static str,
        message: String,
    },
}

impl Intervals {
    /// Checks the intervals against the trace: at most [`MAX_SAMPLES`]
    /// samples and [`MAX_BALANCE_ROUNDS`] rounds.
    pub fn check(&self, duration_s: u64) -> Result<(), SimulateError> {
        if self.sample_every_s == 0 {
            return Err(SimulateError::Interval {
                field: "sample_every_s",
                message: "must be at least 1".to_owned(),
            });
        }
        if duration_s / self.sample_every_s >= MAX_SAMPLES {
            return Err(SimulateError::Interval {
                field: "sample_every_s",
                message: format!(
                    "{duration_s} s sampled every {} s is more than {MAX_SAMPLES} samples",
                    self.sample_every_s
                ),
            });
        }
        if self.balance_every_s > 0 && duration_s / self.balance_every_s > MAX_BALANCE_ROUNDS {
            return Err(SimulateError::Interval {
                field: "balance_every_s",
                message: format!(
                    "{duration_s} s balanced every {} s is more than {MAX_BALANCE_ROUNDS} rounds",
                    self.balance_every_s
                ),
            });
        }
        Ok(())
    }
}

/// A VM on a host of the copy, as the simulated engine knows it.
struct Placed {
    host: String,
    running: RunningVm,
    /// The VM as it arrived; `None` for a VM of the starting cluster.
    spec: Option<VmSpec>,
    resources: Resources,
}

/// The engine's side of a replay: what it started, stopped and moved, and
/// the hosts as they were reported at the start.
struct Engine {
    base: BTreeMap<String, Host>,
    /// Per host, the resources of the VMs started there minus those of
    /// the VMs that left, since the start.
    delta: BTreeMap<String, Resources>,
    vms: BTreeMap<String, Placed>,
}

impl Engine {
    fn new(hosts: &HostInventory) -> Engine {
        let mut vms = BTreeMap::new();
        for record in hosts.records() {
            for vm in &record.vms {
                vms.insert(
                    vm.id.clone(),
                    Placed {
                        host: record.host.id.clone(),
                        running: vm.clone(),
                        spec: None,
                        resources: running_resources(vm),
                    },
                );
            }
        }
        Engine {
            base: hosts
                .records()
                .iter()
                .map(|r| (r.host.id.clone(), r.host.clone()))
                .collect(),
            delta: BTreeMap::new(),
            vms,
        }
    }

    fn add(&mut self, host: &str, resources: &Resources, sign: f64) {
        let delta = self.delta.entry(host.to_owned()).or_default();
        delta.add(&scaled(resources, sign));
    }

    /// Reports `host_id` with `vms` on it and its usage moved by what was
    /// started and stopped there: the engine's report after a change.
    fn report(
        &self,
        state: &mut ClusterState,
        host_id: &str,
        vms: Vec<RunningVm>,
    ) -> Result<(), SimulateError> {
        let Some(mut host) = self.base.get(host_id).cloned() else {
            return Ok(());
        };
        let delta = self.delta.get(host_id).copied().unwrap_or_default();
        let read = |host: &Host, metric: HostMetric| {
            host.metrics
                .get(&metric_name(metric))
                .copied()
                .unwrap_or(0.0)
        };
        let cpus = host_cpus(
            read(&host, HostMetric::CpuThreads),
            read(&host, HostMetric::CpuCores),
        );
        for metric in RUNNING_METRICS {
            let mut value = with_pending(metric, read(&host, metric), &delta, cpus);
            if !may_be_negative(metric) {
                value = value.max(0.0);
            }
            host.metrics.insert(metric_name(metric), value);
        }
        let generation = state.hosts().generation() + 1;
        state.apply_updates(vec![HostUpdate::Upsert {
            generation,
            host,
            vms: Some(vms),
        }])?;
        Ok(())
    }
}

/// A placement's result, unless a unit was starved of CPU by the machine:
/// that stops the simulation (the outer `Err`); anything else is left for
/// the caller to decide on.
fn unless_overloaded<T>(
    result: Result<T, PlaceError>,
) -> Result<Result<T, PlaceError>, SimulateError> {
    match result {
        Err(PlaceError::Schedule { instance, error }) => match *error {
            ScheduleError::Overloaded { unit, failed } => Err(SimulateError::Overloaded {
                unit,
                failed: Box::new(failed),
            }),
            other => Ok(Err(PlaceError::Schedule {
                instance,
                error: Box::new(other),
            })),
        },
        other => Ok(other),
    }
}

/// `resources` times `k` (−1: taken away).
fn scaled(r: &Resources, k: f64) -> Resources {
    Resources {
        memory_mib: r.memory_mib * k,
        memory_guaranteed_mib: r.memory_guaranteed_mib * k,
        vcpus: r.vcpus * k,
        cpu_vcpu_percent: r.cpu_vcpu_percent * k,
        disk_gib: r.disk_gib * k,
        vms: r.vms * k,
    }
}

/// What a VM of the starting cluster takes, as a claim of it would.
fn running_resources(vm: &RunningVm) -> Resources {
    let mut spec = vm.to_migration();
    spec.current_host = None;
    spec.to_vm(&HostIndex::default(), "vm")
        .map(|vm| Resources::of_vm(&vm))
        .unwrap_or_default()
}

/// The VMs of `host_id` as held, `without` one and `with` one more.
fn vms_of(
    state: &ClusterState,
    host_id: &str,
    without: Option<&str>,
    with: Option<RunningVm>,
) -> Vec<RunningVm> {
    let mut vms: Vec<RunningVm> = state
        .hosts()
        .get(host_id)
        .map(|(_, r)| r.vms.clone())
        .unwrap_or_default();
    if let Some(id) = without {
        vms.retain(|v| v.id != id);
    }
    vms.extend(with);
    vms
}

/// One replay's running figures.
struct Tally {
    placed: usize,
    refused: usize,
    reasons: BTreeMap<String, usize>,
    migrations: usize,
    per_host: BTreeMap<String, usize>,
    samples: Vec<Sample>,
    decisions: u128,
}

/// Replays `trace` against `candidate` on a copy of `start`.
pub fn replay(
    start: &Start,
    trace: &Trace,
    candidate: &Candidate,
    intervals: Intervals,
) -> Result<PolicyReport, SimulateError> {
    intervals.check(trace.duration_s)?;
    let mut state = ClusterState::restore(start.hosts.clone(), start.claims.iter().cloned());
    let mut engine = Engine::new(&start.hosts);
    let mut tally = Tally {
        placed: 0,
        refused: 0,
        reasons: BTreeMap::new(),
        migrations: 0,
        per_host: BTreeMap::new(),
        samples: Vec::new(),
        decisions: 0,
    };
    let mut replay = Replay {
        state: &mut state,
        engine: &mut engine,
        tally: &mut tally,
        candidate,
        epoch: start.now,
    };
    let balances = candidate.policy.balance_unit().is_some() && intervals.balance_every_s > 0;
    let mut next_balance = intervals.balance_every_s;
    let mut next_sample = 0;
    let mut events = trace.events.iter().peekable();
    // Events at a time first, then that time's balancing round, then its
    // sample; up to the end of the trace.
    loop {
        let next_event = events.peek().map(|e| e.at_s());
        let next_tick = if balances {
            next_balance.min(next_sample)
        } else {
            next_sample
        };
        match next_event {
            Some(at) if at <= next_tick => {
                if let Some(event) = events.next() {
                    replay.event(event)?;
                }
            }
            _ if next_tick > trace.duration_s => break,
            _ => {
                if balances && next_balance == next_tick {
                    replay.balance(next_balance)?;
                    next_balance = next_balance.saturating_add(intervals.balance_every_s);
                }
                if next_sample == next_tick {
                    let sample = replay.sample(next_sample);
                    replay.tally.samples.push(sample);
                    next_sample = next_sample.saturating_add(intervals.sample_every_s);
                }
            }
        }
    }
    let at_end = replay
        .tally
        .samples
        .last()
        .filter(|s| s.at_s == trace.duration_s)
        .cloned();
    let last = match at_end {
        Some(sample) => sample,
        None => {
            // The end is between two samples: sampled too, so the
            // charts reach it.
            let sample = replay.sample(trace.duration_s);
            replay.tally.samples.push(sample.clone());
            sample
        }
    };
    let placements_per_host = start
        .hosts
        .records()
        .iter()
        .map(|r| HostPlacements {
            host_id: r.host.id.clone(),
            placements: tally.per_host.get(&r.host.id).copied().unwrap_or(0),
        })
        .collect();
    Ok(PolicyReport {
        policy: candidate.name.clone(),
        policy_id: candidate.policy_id,
        placed: tally.placed,
        refused: tally.refused,
        refusals: refusals(tally.reasons),
        migrations: tally.migrations,
        samples: tally.samples,
        last,
        placements_per_host,
    })
}

/// The reasons, most frequent first (ties by text), the tail summed.
fn refusals(reasons: BTreeMap<String, usize>) -> Vec<Refusal> {
    let mut all: Vec<Refusal> = reasons
        .into_iter()
        .map(|(reason, count)| Refusal { reason, count })
        .collect();
    all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    if all.len() > MAX_REFUSAL_REASONS {
        let rest: usize = all[MAX_REFUSAL_REASONS - 1..].iter().map(|r| r.count).sum();
        all.truncate(MAX_REFUSAL_REASONS - 1);
        all.push(Refusal {
            reason: "other reasons".to_owned(),
            count: rest,
        });
    }
    all
}

/// A replay in progress.
struct Replay<'a> {
    state: &'a mut ClusterState,
    engine: &'a mut Engine,
    tally: &'a mut Tally,
    candidate: &'a Candidate,
    epoch: Timestamp,
}

impl<'a> Replay<'a> {
    fn now(&self, at_s: u64) -> Timestamp {
        self.epoch.after(Duration::from_secs(at_s))
    }

    /// The context of the next decision, borrowing only the candidate.
    fn context(&mut self, at_s: u64) -> PlaceContext<'a> {
        self.tally.decisions += 1;
        let candidate: &'a Candidate = self.candidate;
        PlaceContext {
            policy: &candidate.policy,
            params: &candidate.params,
            // Numbered, not random: claims carry it, and the state must be
            // the same on every run.
            decision_id: Uuid::from_u128(self.tally.decisions),
            now: self.epoch.after(Duration::from_secs(at_s)),
            claim_ttl: crate::placement::config::DEFAULT_CLAIM_TTL,
            hold_deadline: None,
            dry_run: false,
            sampling: Sampling::All,
            reuse_answers: true,
            // A simulation runs beside live decisions: it borrows no cores.
            cores: None,
        }
    }

    fn place_error(&self, error: PlaceError) -> SimulateError {
        SimulateError::Place {
            policy: self.candidate.name.clone(),
            error: Box::new(error),
        }
    }

    fn event(&mut self, event: &Event) -> Result<(), SimulateError> {
        match event {
            Event::Arrive { at_s, vm } => self.arrive(*at_s, vm),
            Event::Depart { vm_id, .. } => self.depart(vm_id),
        }
    }

    /// A schedule decision for the VM; placed, the engine starts it.
    fn arrive(&mut self, at_s: u64, vm: &VmSpec) -> Result<(), SimulateError> {
        // A VM of the starting cluster cannot start again (the trace was
        // checked against itself, not against the cluster).
        if let Some(running) = self.engine.vms.get(&vm.id) {
            let reason = format!("already running on {}", running.host);
            self.refuse([reason].into());
            return Ok(());
        }
        let request = PlaceRequest {
            vm: vm.clone(),
            count: 1,
            ..PlaceRequest::default()
        };
        let cx = self.context(at_s);
        let placed = unless_overloaded(self.state.place(&request, &cx))?;
        let outcome = match placed {
            Ok((outcome, _)) => outcome,
            // The VM cannot be decided (a fail-closed unit failed, it
            // names hosts the cluster lacks): refused, with that reason.
            Err(error @ (PlaceError::Schedule { .. } | PlaceError::InvalidSnapshot(_))) => {
                self.refuse([error.to_string()].into());
                return Ok(());
            }
            Err(PlaceError::Invalid(e)) => {
                self.refuse([e.to_string()].into());
                return Ok(());
            }
            Err(error) => return Err(self.place_error(error)),
        };
        let pick = outcome.picks.last();
        let (Some(host), Some(claim), true) = (
            pick.and_then(|p| p.host_id.clone()),
            outcome.claims.first(),
            outcome.complete,
        ) else {
            let reasons: BTreeSet<String> = pick
                .map(|p| {
                    p.decision
                        .explain
                        .rejections()
                        .into_iter()
                        .map(|(unit, reason, _)| format!("{unit}: {reason}"))
                        .collect()
                })
                .unwrap_or_default();
            let reasons = if reasons.is_empty() {
                ["no host".to_owned()].into()
            } else {
                reasons
            };
            self.refuse(reasons);
            return Ok(());
        };
        let resources = claim.resources;
        self.state.confirm(&vm.id, None)?;
        let running = RunningVm {
            id: vm.id.clone(),
            name: vm.name.clone(),
            host: host.clone(),
            memory_mib: vm.memory_mib,
            memory_guaranteed_mib: vm.memory_guaranteed_mib,
            vcpus: vm.vcpus,
            // What its claim counted, so that it moves as it arrived.
            cpu_usage_percent: vm
                .cpu_usage_percent
                .unwrap_or(crate::placement::resources::DEFAULT_VCPU_CONSUMPTION_PERCENT),
            migratable: true,
            highly_available: vm.highly_available,
            hosted_engine: vm.hosted_engine,
            pending: false,
        };
        self.engine.add(&host, &resources, 1.0);
        let vms = vms_of(self.state, &host, None, Some(running.clone()));
        self.engine.report(self.state, &host, vms)?;
        self.engine.vms.insert(
            vm.id.clone(),
            Placed {
                host: host.clone(),
                running,
                spec: Some(vm.clone()),
                resources,
            },
        );
        self.tally.placed += 1;
        *self.tally.per_host.entry(host).or_default() += 1;
        Ok(())
    }

    fn refuse(&mut self, reasons: BTreeSet<String>) {
        self.tally.refused += 1;
        for reason in reasons {
            *self.tally.reasons.entry(reason).or_default() += 1;
        }
    }

    /// The engine stops the VM; a VM that was refused, or never there,
    /// leaves nothing to stop.
    fn depart(&mut self, vm_id: &str) -> Result<(), SimulateError> {
        let Some(placed) = self.engine.vms.remove(vm_id) else {
            return Ok(());
        };
        self.engine.add(&placed.host, &placed.resources, -1.0);
        let vms = vms_of(self.state, &placed.host, Some(vm_id), None);
        self.engine.report(self.state, &placed.host, vms)
    }

    /// One balancing round, as `rebalance::round` runs it (with the
    /// migration done at once, so never one in flight).
    fn balance(&mut self, at_s: u64) -> Result<(), SimulateError> {
        let now = self.now(at_s);
        let (inventory, _, _) = self
            .state
            .held_snapshot(now, None)
            .map_err(|e| self.place_error(PlaceError::Inventory(e)))?;
        let job = BalanceJob {
            policy: std::sync::Arc::new(self.candidate.policy.clone()),
            params: self.candidate.params.clone(),
            candidates: None,
            source: HostsSource::Held,
        };
        let balanced = match balance::run(job, Some((inventory, None))) {
            Ok(balanced) => balanced,
            Err(BalanceFailure::Balance(
                BalanceError::BalanceFailed { unit, failed }
                | BalanceError::Schedule(ScheduleError::Overloaded { unit, failed }),
            )) if failed.error.is_overload() => {
                return Err(SimulateError::Overloaded {
                    unit,
                    failed: Box::new(failed),
                });
            }
            Err(error) => {
                return Err(SimulateError::Balance {
                    policy: self.candidate.name.clone(),
                    at_s,
                    error: Box::new(error),
                });
            }
        };
        let (Some(vm_id), Some(destination)) = (balanced.vm_id, balanced.destination) else {
            return Ok(());
        };
        let Some(placed) = self.engine.vms.get(&vm_id) else {
            // A VM only claimed (a held cluster's pending start): the
            // engine has not started it, so it cannot move it.
            return Ok(());
        };
        let source = placed.host.clone();
        if source == destination {
            return Ok(());
        }
        let mut vm = placed
            .spec
            .clone()
            .unwrap_or_else(|| placed.running.to_migration());
        vm.current_host = Some(source.clone());
        // The re-check, which claims the destination if it still wins.
        let request = PlaceRequest {
            vm,
            candidates: Some(vec![source.clone(), destination.clone()]),
            count: 1,
            ..PlaceRequest::default()
        };
        let cx = self.context(at_s);
        let outcome = match unless_overloaded(self.state.place(&request, &cx))? {
            Ok((outcome, _)) => outcome,
            Err(PlaceError::Schedule { .. }) => return Ok(()),
            Err(error) => return Err(self.place_error(error)),
        };
        let won = outcome.picks.last().and_then(|p| p.host_id.as_deref()) == Some(&destination);
        if !won || outcome.claims.is_empty() {
            return Ok(());
        }
        self.state.confirm(&vm_id, None)?;
        let Some(mut placed) = self.engine.vms.remove(&vm_id) else {
            return Ok(());
        };
        self.engine.add(&source, &placed.resources, -1.0);
        self.engine.add(&destination, &placed.resources, 1.0);
        placed.host = destination.clone();
        placed.running.host = destination.clone();
        let to = vms_of(self.state, &destination, None, Some(placed.running.clone()));
        let from = vms_of(self.state, &source, Some(&vm_id), None);
        self.engine.vms.insert(vm_id, placed);
        self.engine.report(self.state, &destination, to)?;
        self.engine.report(self.state, &source, from)?;
        self.tally.migrations += 1;
        Ok(())
    }

    /// The cluster as a decision at `at_s` sees it (which drops the
    /// claims expired by then, as that decision would).
    fn sample(&mut self, at_s: u64) -> Sample {
        let now = self.now(at_s);
        // A state whose columns cannot be built has failed a decision
        // already, so this empty sample never reaches a report.
        let inventory = self
            .state
            .held_snapshot(now, None)
            .map(|(inventory, _, _)| inventory)
            .unwrap_or_else(|_| Inventory::new(0, 0));
        sample_of(&inventory, at_s)
    }
}

/// Utilisation, VMs and empty hosts of an inventory.
fn sample_of(inventory: &Inventory, at_s: u64) -> Sample {
    let n = inventory.host_count();
    let total = inventory.host_metric(HostMetric::MemoryTotalMib);
    let free = inventory.host_metric(HostMetric::MemoryFreeMib);
    let cpu = inventory.host_metric(HostMetric::CpuUsagePercent);
    let fraction = |v: f64| {
        if v.is_finite() {
            v.clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let memory: Vec<f64> = (0..n)
        .map(|i| {
            let total = total.get(i).copied().unwrap_or(0.0);
            let free = free.get(i).copied().unwrap_or(0.0);
            if total > 0.0 {
                fraction(1.0 - free / total)
            } else {
                0.0
            }
        })
        .collect();
    let cpu: Vec<f64> = (0..n)
        .map(|i| fraction(cpu.get(i).copied().unwrap_or(0.0) / 100.0))
        .collect();
    let mut busy = vec![false; n];
    for &host in inventory.vm_hosts() {
        if let Some(b) = busy.get_mut(host as usize) {
            *b = true;
        }
    }
    Sample {
        at_s,
        vms: inventory.vm_count(),
        empty_hosts: busy.iter().filter(|b| !**b).count(),
        memory: Spread::of(&memory),
        cpu: Spread::of(&cpu),
    }
}
