//! One pass of a placement: every instance of a request in turn over one
//! view of the held hosts (all of them, or a sample window), nothing
//! recorded yet.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Instant;

use sandpiper_model::GroupScope;

use super::instances::candidate_rows;
use super::{Pick, PlaceError};
use crate::hardware::claim::{self as hardware_claim, HardwareClaim};
use crate::pipeline::{
    self, Lender, Means, ParamValues, Policy, Reuse, ReuseCache, ScheduleRequest, Stamp, Stamps,
};
use crate::placement::columns::{CLAIMED_COLUMNS, Columns, PendingVm, Window};
use crate::placement::request::PlaceRequest;
use crate::placement::resources::Resources;
use crate::snapshot::hint_pairs;

/// One pass of a placement: every instance in turn over one view of the
/// hosts (all of them, or a window), nothing recorded yet.
pub(super) struct Pass<'a> {
    pub(super) columns: &'a Columns,
    pub(super) window: Option<&'a Window>,
    pub(super) request: &'a PlaceRequest,
    pub(super) ids: &'a [String],
    /// Claims by held row; each pick adds to it (virtual consumption).
    pub(super) pending: HashMap<usize, Resources>,
    /// The claimed VMs on the hosts considered; each pick adds its
    /// instance, so later picks see it in the VM columns.
    pub(super) vms: Vec<PendingVm<'a>>,
    /// Claims of specific hardware by held row; each pick that takes
    /// hardware adds to it.
    pub(super) hardware: Vec<(usize, Arc<HardwareClaim>)>,
    pub(super) first: (&'a Policy, &'a ParamValues),
    /// The policy and parameters of instances after the first, when some
    /// filters run once per request.
    pub(super) later: Option<(&'a Policy, &'a ParamValues)>,
    pub(super) hold_deadline: Option<Instant>,
    pub(super) started: Instant,
    /// Where per-host units' answers are kept between decisions; `None`
    /// decides whole.
    pub(super) reuse: Option<&'a mut ReuseCache>,
    /// Lends each decision more cores (`pipeline::parallel`).
    pub(super) cores: Option<&'a dyn Lender>,
}

/// What a pass decided.
pub(super) struct Passed {
    pub(super) picks: Vec<Pick>,
    /// (instance, held row, whether the VM stays on its current host,
    /// the hardware it took).
    pub(super) placed: Vec<(String, usize, bool, Option<Arc<HardwareClaim>>)>,
    pub(super) complete: bool,
    /// What one instance takes.
    pub(super) resources: Resources,
    /// The held rows the failing pick considered (`None`: every host).
    pub(super) failed_over: Option<Vec<u32>>,
}

/// Runs a pass. `Ok(None)` when the pass cannot be made over its window:
/// the VM refers to hosts outside it, or every host of it is excluded.
pub(super) fn run_pass(pass: Pass<'_>) -> Result<Option<Passed>, PlaceError> {
    let Pass {
        columns,
        window,
        request,
        ids,
        mut pending,
        mut vms,
        mut hardware,
        first,
        later,
        hold_deadline,
        started,
        mut reuse,
        cores,
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
        let mut inventory = match window {
            Some(w) => columns.window_with_pending(w, &rows, &vms),
            None => columns.with_pending(&rows, &vms),
        };
        let taken: Vec<(usize, &HardwareClaim)> = hardware
            .iter()
            .filter_map(|(row, claim)| {
                let local = row.checked_sub(offset)?;
                (local < host_count).then_some((local, claim.as_ref()))
            })
            .collect();
        hardware_claim::apply(&mut inventory, &taken);
        let inventory = Arc::new(inventory);
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
        let by_host = reuse
            .is_some()
            .then(|| stamps(columns, offset, host_count, &rows, &vms, &taken));
        let means = Means {
            reuse: reuse
                .as_deref_mut()
                .zip(by_host.as_deref())
                .map(|(cache, by_host)| Reuse {
                    cache,
                    view: (offset, host_count),
                    stamps: Stamps {
                        by_host,
                        claimed_columns: CLAIMED_COLUMNS,
                        // Held hosts' stamps change with any report.
                        rows: None,
                    },
                }),
            cores,
        };
        let decided = pipeline::schedule_with(policy, &inventory, &schedule_request, means);
        let mut decision = decided.map_err(|error| PlaceError::Schedule {
            instance: id.clone(),
            error: Box::new(error),
        })?;
        let took = super::fit::claim_hardware(&inventory, &vm, &mut decision).map(Arc::new);
        let Some(host) = decision.chosen else {
            failed_over = candidates
                .as_ref()
                .map(|c| c.iter().map(|&h| h + offset as u32).collect());
            picks.push(Pick {
                vm_id: id.clone(),
                host_id: None,
                decision,
                hardware: None,
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
            if let Some(took) = &took {
                hardware.push((row, Arc::clone(took)));
            }
        }
        for group in vm.groups.iter_mut().filter(|g| g.scope == GroupScope::Vms) {
            group.hosts.push(host);
        }
        placed.push((id.clone(), row, stays, took.clone()));
        picks.push(Pick {
            vm_id: id.clone(),
            host_id: hosts.id(host).map(str::to_owned),
            decision,
            hardware: took,
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

/// The stamps of the view's hosts (held rows `offset..offset + count`) for
/// reusing per-host units' answers: each row's reported stamp with a
/// fingerprint of what is pending on it (the sum of its claims and each
/// claimed VM, in any order: the snapshot shows exactly these), and no
/// reuse at all for a host with specific hardware taken. None when the
/// rows are not held: the decision is then made whole.
fn stamps(
    columns: &Columns,
    offset: usize,
    count: usize,
    pending: &[(usize, Resources)],
    vms: &[PendingVm<'_>],
    taken: &[(usize, &HardwareClaim)],
) -> Vec<Stamp> {
    // Keyed as the hosts' content fingerprints are (`sandpiper_model::
    // fingerprint`): a sum of such hashes stays collision-resistant.
    static KEYS: std::sync::OnceLock<foldhash::quality::RandomState> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(foldhash::quality::RandomState::default);
    let Some(reported) = columns.stamps().get(offset..offset + count) else {
        return Vec::new();
    };
    let mut stamps: Vec<Stamp> = reported
        .iter()
        .map(|&reported| Stamp {
            reported,
            claimed: 0,
        })
        .collect();
    let mut add = |row: usize, fingerprint: u64| {
        if let Some(stamp) = row
            .checked_sub(offset)
            .and_then(|local| stamps.get_mut(local))
        {
            stamp.claimed = stamp.claimed.wrapping_add(fingerprint);
        }
    };
    for &(row, sum) in pending {
        add(row, keys.hash_one(sum.bits()));
    }
    for vm in vms {
        add(vm.row, keys.hash_one((vm.id, vm.resources.bits())));
    }
    for &(local, _) in taken {
        if let Some(stamp) = stamps.get_mut(local) {
            *stamp = Stamp::NONE;
        }
    }
    stamps
}
