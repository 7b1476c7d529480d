//! One balancing round: ask the policy's balance unit for a migration, then
//! let the policy's filters and scores decide where the VM goes — which may
//! be where it already is.
//!
//! As in oVirt, a balance unit proposes, it does not decide: the proposed VM
//! is scheduled over the proposed destinations plus its current host, and a
//! migration happens only if a destination wins. The current host is put
//! **first** among those candidates, so that under the tie-break rule (first
//! candidate wins) a destination must score strictly better than staying:
//! a migration that gains nothing is not worth its cost.

use std::sync::Arc;

use sandpiper_model::Inventory;
use sandpiper_model::{BalanceRequest, Migration, Vm, VmFlag, VmMetric, VmText};

use super::explain::{BalanceExplain, SnapshotRef};
use super::params::{ParamError, ParamValues};
use super::policy::Policy;
use super::schedule::{ScheduleError, ScheduleRequest, schedule};
use crate::unit::{Failed, Role, UnitError};

/// What a balancing round may consider.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BalanceInput {
    /// Hosts VMs may move between, distinct; `None` means every host.
    pub candidates: Option<Vec<u32>>,
    /// The cluster's parameter overrides.
    pub params: ParamValues,
}

/// The result of a balancing round.
#[derive(Clone, Debug)]
pub struct BalanceDecision {
    /// The unit's proposal, `None` when it found the cluster balanced.
    pub proposal: Option<Migration>,
    /// Where the proposed VM should move; `None` when there was no proposal,
    /// when its current host won, or when no candidate could take it.
    pub destination: Option<u32>,
    pub explain: BalanceExplain,
}

/// Why a balancing round could not be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BalanceError {
    #[error("the policy has no balance unit")]
    NoBalanceUnit,
    #[error(transparent)]
    Params(#[from] ParamError),
    #[error("candidate host {host} is out of range: the snapshot has {host_count} hosts")]
    CandidateOutOfRange { host: u32, host_count: usize },
    #[error("candidate host {host} is listed twice")]
    DuplicateCandidate { host: u32 },
    #[error("balance unit `{unit}` failed: {}", failed.error)]
    BalanceFailed { unit: String, failed: Failed },
    #[error("running VM {vm} is on host {host}, which is not in the snapshot")]
    VmOnUnknownHost { vm: u32, host: u32 },
    #[error("scheduling the proposed migration failed: {0}")]
    Schedule(#[from] ScheduleError),
}

/// Runs the policy's balance unit and, if it proposes a migration, decides
/// whether and where the VM moves.
pub fn balance(
    policy: &Policy,
    inventory: &Arc<Inventory>,
    input: &BalanceInput,
) -> Result<BalanceDecision, BalanceError> {
    let unit = policy.balance_unit().ok_or(BalanceError::NoBalanceUnit)?;
    let resolved = policy.param_table().resolve(&input.params)?;
    let host_count = inventory.host_count();
    let candidates = match &input.candidates {
        None => (0..host_count as u32).collect(),
        Some(given) => {
            check_distinct_hosts(given, host_count)?;
            given.clone()
        }
    };
    let request = BalanceRequest {
        params: resolved.for_slot(policy.balance_slot()).to_vec(),
        candidates,
    };
    let name = unit.info().name.clone();
    let called = unit.balance(inventory, &request).map_err(|failed| {
        super::degraded::observe_failed(&name, Role::Balance, &failed);
        BalanceError::BalanceFailed {
            unit: name.clone(),
            failed,
        }
    })?;
    let usage = called.usage;
    crate::metrics::unit_call(&name, Role::Balance, &usage);
    let invalid = |reason: String| {
        crate::metrics::unit_failed(&name, Role::Balance, "invalid_output", false);
        BalanceError::BalanceFailed {
            unit: name.clone(),
            failed: Failed {
                error: UnitError::InvalidOutput(reason),
                usage,
            },
        }
    };

    let mut explain = BalanceExplain {
        unit: name.clone(),
        usage,
        proposal: None,
        source: None,
        schedule: None,
        inventory: SnapshotRef(Arc::clone(inventory)),
    };
    let Some(proposal) = called.value else {
        return Ok(BalanceDecision {
            proposal: None,
            destination: None,
            explain,
        });
    };
    if proposal.vm as usize >= inventory.vm_count() {
        return Err(invalid(format!(
            "proposed VM {} is out of range: the snapshot has {} VMs",
            proposal.vm,
            inventory.vm_count()
        )));
    }
    let source = inventory
        .vm_hosts()
        .get(proposal.vm as usize)
        .copied()
        .filter(|&h| (h as usize) < host_count)
        .ok_or_else(|| BalanceError::VmOnUnknownHost {
            vm: proposal.vm,
            host: inventory
                .vm_hosts()
                .get(proposal.vm as usize)
                .copied()
                .unwrap_or(u32::MAX),
        })?;
    check_destinations(&proposal, source, &request.candidates, host_count).map_err(invalid)?;
    let candidates = std::iter::once(source)
        .chain(
            proposal
                .destinations
                .iter()
                .copied()
                .filter(|&h| h != source),
        )
        .collect();
    let decision = schedule(
        policy,
        inventory,
        &ScheduleRequest {
            vm: running_vm(inventory, proposal.vm, source),
            hints: Vec::new(),
            candidates: Some(candidates),
            params: input.params.clone(),
        },
    )?;
    explain.proposal = Some(proposal.clone());
    explain.source = Some(source);
    explain.schedule = Some(decision.explain);
    let destination = explain.destination();
    Ok(BalanceDecision {
        proposal: Some(proposal),
        destination,
        explain,
    })
}

fn check_distinct_hosts(hosts: &[u32], host_count: usize) -> Result<(), BalanceError> {
    let mut seen = vec![false; host_count];
    for &host in hosts {
        match seen.get_mut(host as usize) {
            None => return Err(BalanceError::CandidateOutOfRange { host, host_count }),
            Some(true) => return Err(BalanceError::DuplicateCandidate { host }),
            Some(slot) => *slot = true,
        }
    }
    Ok(())
}

/// A proposal's destinations must be one or more distinct hosts among the
/// round's candidates. (Listing the VM's own host is tolerated: it is a
/// candidate of the decision anyway.)
fn check_destinations(
    proposal: &Migration,
    source: u32,
    candidates: &[u32],
    host_count: usize,
) -> Result<(), String> {
    if proposal.destinations.is_empty() {
        return Err("the proposed migration has no destination".to_owned());
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Slot {
        Barred,
        Open,
        Taken,
    }
    let mut slots = vec![Slot::Barred; host_count];
    for &c in candidates {
        slots[c as usize] = Slot::Open;
    }
    for &host in &proposal.destinations {
        if host == source {
            continue;
        }
        match slots.get_mut(host as usize) {
            Some(slot @ Slot::Open) => *slot = Slot::Taken,
            Some(Slot::Taken) => return Err(format!("destination {host} is listed twice")),
            _ => return Err(format!("destination {host} is not a candidate host")),
        }
    }
    Ok(())
}

/// The running VM `vm` as a placement request, from the VM columns.
fn running_vm(inventory: &Inventory, vm: u32, source: u32) -> Vm {
    let i = vm as usize;
    let metric = |m: VmMetric| inventory.vm_metric(m).get(i).copied().unwrap_or(0.0);
    let flag = |f: VmFlag| inventory.vm_flag(f).get(i).copied().unwrap_or(false);
    Vm {
        id: inventory.vm_text(VmText::Id).get(i).to_owned(),
        name: inventory.vm_text(VmText::Name).get(i).to_owned(),
        memory_mib: metric(VmMetric::MemoryMib),
        memory_guaranteed_mib: metric(VmMetric::MemoryGuaranteedMib),
        // Float-to-int `as` saturates; a vCPU count is a small whole number.
        vcpus: metric(VmMetric::Vcpus) as u32,
        cpu_usage_percent: Some(metric(VmMetric::CpuUsagePercent)),
        current_host: Some(source),
        highly_available: flag(VmFlag::HighlyAvailable),
        hosted_engine: flag(VmFlag::HostedEngine),
        ..Vm::default()
    }
}
