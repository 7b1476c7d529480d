//! Claim-time hardware fitting: after the policy picks a host for a VM
//! with hardware needs (guest NUMA cells, pinned CPUs, huge pages, PCI
//! devices, mdevs), the service fits the VM on that host natively with the
//! units' own library (`sandpiper_hardware`, Nova's algorithm) over the
//! very snapshot the policy read, pending claims' hardware included, and
//! claims exactly what the fit took.
//!
//! Why here and not only in the policy's filters: a filter says some fit
//! exists, not which CPUs or device a claim must hold, and a policy may
//! have no hardware filter at all. Fitting again under the cluster's lock
//! is what keeps two decisions from both taking the last free GPU or the
//! last free pinned cores.
//!
//! A host the fit refuses is refused like a filter rejection: the next
//! survivor in ranked order is tried, and if none fits there is no host.
//! The refusals show in the explain record as one more filter, `hardware
//! claim`, after the policy's; what was taken shows as its `hardware`.

use std::collections::BTreeMap;
use std::sync::Arc;

use sandpiper_hardware::{Fitter, Options};
use sandpiper_model::hardware::VmHardware;
use sandpiper_model::{Inventory, Rejection, Vm};

use crate::hardware::claim::HardwareClaim;
use crate::pipeline::{Decision, FilterRecord, OnFailure, Outcome, Position};

/// The name the claim-time fit has in explain records.
pub const CLAIM_UNIT: &str = "hardware claim";

/// Fits `vm` on the host `decision` chose, or on the next survivor that
/// fits, updating the decision (chosen host, survivors, outcome, explain
/// record) to match; the hardware taken, `None` when the VM needs none or
/// no host fits (then `decision.chosen` is `None`). The VM's current host
/// (a migration that stays) fits as it is: the VM already holds its
/// hardware there.
pub fn claim_hardware(
    inventory: &Arc<Inventory>,
    vm: &Vm,
    decision: &mut Decision,
) -> Option<HardwareClaim> {
    let first = decision.chosen?;
    if vm.hardware == VmHardware::default() {
        // Most VMs: nothing to fit, and no fitter to set up per pick.
        return None;
    }
    let mut fitter = Fitter::new(inventory, vm, Options::everything());
    if !fitter.has_work() {
        return None;
    }
    let order: Vec<u32> = std::iter::once(first)
        .chain(
            decision
                .ranked
                .iter()
                .map(|r| r.host)
                .filter(|&h| h != first),
        )
        .collect();
    let mut refused: Vec<(u32, String)> = Vec::new();
    let mut taken = None;
    for host in order {
        if vm.current_host == Some(host) {
            taken = Some((host, None));
            break;
        }
        match fitter.fit(host as usize) {
            Ok(assignment) => {
                let claim = HardwareClaim::from_assignment(inventory, host as usize, assignment);
                taken = Some((host, Some(claim)));
                break;
            }
            Err(unfit) => refused.push((host, unfit.to_string())),
        }
    }
    let chosen = taken.as_ref().map(|(host, _)| *host);
    if !refused.is_empty() {
        record_refusals(decision, &refused, chosen);
    }
    let claim = taken.and_then(|(_, claim)| claim);
    decision.explain.hardware = claim.clone().map(Arc::new);
    claim
}

/// Writes the claim-time refusals into `decision`: a filter record after
/// the policy's, the refused hosts out of the survivors, `chosen` the
/// winner.
fn record_refusals(decision: &mut Decision, refused: &[(u32, String)], chosen: Option<u32>) {
    let input = decision.ranked.len().max(refused.len());
    let mut by_reason: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (host, reason) in refused {
        by_reason.entry(reason).or_default().push(*host);
    }
    decision
        .ranked
        .retain(|r| !refused.iter().any(|(host, _)| *host == r.host));
    decision.explain.filters.push(FilterRecord {
        unit: CLAIM_UNIT.to_owned(),
        position: Position::Last,
        on_failure: OnFailure::FailClosed,
        input,
        rejected: by_reason
            .into_iter()
            .map(|(reason, hosts)| Rejection::new(reason, hosts))
            .collect(),
        survivors: input - refused.len(),
        usage: Default::default(),
        failure: None,
        skipped: None,
        reused: 0,
    });
    decision.chosen = chosen;
    decision.explain.outcome = match chosen {
        None => Outcome::NoHost,
        Some(host) if decision.explain.scored.is_empty() => Outcome::SingleSurvivor { host },
        Some(winner) => Outcome::Weighed {
            winner,
            tied_with: Vec::new(),
        },
    };
}
