//! `Memory`: rejects hosts that cannot hold the VM's memory.
//!
//! Behaviour from oVirt's `MemoryPolicyUnit` and `SlaValidator`
//! (`bll/scheduling/policyunits/MemoryPolicyUnit.java`; our reference notes,
//! §2.1). Two checks per candidate, both skipped for the host the VM already
//! runs on (its memory is already there):
//!
//! * **physical**: the host's free memory after pending placements must
//!   not be negative, and the VM's memory must fit in that free memory plus
//!   free swap;
//! * **over-commit**: what the host has promised to VMs (committed memory,
//!   pending placements included) plus its own reservation plus the VM's
//!   guaranteed memory must stay within `MaxMemoryOverCommit` percent of its
//!   physical memory — oVirt's "max scheduling memory".
//!
//! Where we differ from oVirt, and why:
//! * oVirt adds a per-VM overhead estimate and huge pages; our inventory has
//!   neither, and already subtracts pending memory from free memory.
//! * oVirt's filter can ask the scheduler to wait once for pending memory to
//!   settle; a unit cannot delay the pipeline, so the reason names the
//!   pending memory instead.
//! * oVirt compares full memory sizes plus overhead in the over-commit check;
//!   our committed column holds guaranteed sizes, so the VM counts its
//!   guaranteed size too (its full size when it has none).
//! * oVirt reads the over-commit percentage from the cluster
//!   (`max_vds_memory_over_commit`); here it is the unit's parameter,
//!   default 100, oVirt's "no over-commit" setting.

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::params::{self, MAX_MEMORY_OVER_COMMIT};
use sandpiper_ovirt::value;

/// The `Memory` filter.
pub struct MemoryFilter;

impl Unit for MemoryFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Memory",
            "Rejects hosts whose free memory and swap cannot hold the VM, or whose \
             schedulable memory under the over-commit limit cannot guarantee it.",
        )
        .with_param(params::max_memory_over_commit())
        .per_host()
    }
}

impl Filter for MemoryFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let over_commit_percent = match cx.params().f64(MAX_MEMORY_OVER_COMMIT) {
            Ok(percent) => percent,
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let vm = cx.vm();
        let need = Need {
            memory_mib: float::max(vm.memory_mib, 0.0),
            guaranteed_mib: if vm.memory_guaranteed_mib > 0.0 {
                vm.memory_guaranteed_mib
            } else {
                float::max(vm.memory_mib, 0.0)
            },
        };
        let hosts = cx.hosts();
        let columns = Columns::new(&hosts);
        for &host in candidates {
            // An index past the snapshot is no host: skipped, as
            // `Hosts::candidates` skips it.
            if hosts.get(host).is_none() || vm.current_host == Some(host) {
                continue;
            }
            check(&columns, host, &need, over_commit_percent, &mut rejections);
        }
        rejections.into_vec()
    }
}

/// What the VM asks of a host, MiB.
struct Need {
    memory_mib: f64,
    guaranteed_mib: f64,
}

/// The columns the checks read, fetched once per call and read as
/// slices: a per-host accessor looks its column up again for every value.
struct Columns<'a> {
    total: &'a [f64],
    free: &'a [f64],
    pending: &'a [f64],
    swap_free: &'a [f64],
    committed: &'a [f64],
    reserved: &'a [f64],
}

impl<'a> Columns<'a> {
    fn new(hosts: &Hosts<'a>) -> Self {
        Columns {
            total: hosts.metric(HostMetric::MemoryTotalMib),
            free: hosts.metric(HostMetric::MemoryFreeMib),
            pending: hosts.metric(HostMetric::MemoryPendingMib),
            swap_free: hosts.metric(HostMetric::SwapFreeMib),
            committed: hosts.metric(HostMetric::MemoryCommittedMib),
            reserved: hosts.metric(HostMetric::MemoryReservedMib),
        }
    }
}

/// True for a positive figure; false for zero, negative or missing (NaN).
fn reported(figure: f64) -> bool {
    figure > 0.0
}

/// True when `available` covers `need`; false when either is missing (NaN),
/// so that missing data rejects rather than admits.
fn covers(available: f64, need: f64) -> bool {
    available >= need
}

/// Rejects `host` if it cannot take the VM.
///
/// Reasons go out as templates and figures (`Rejections::reject_with`):
/// the host writes the sentences, so this unit formats nothing for the
/// thousands of hosts it may reject (formatting them was most of its
/// sandboxed time).
fn check(
    columns: &Columns<'_>,
    host: u32,
    need: &Need,
    over_commit_percent: f64,
    rejections: &mut Rejections,
) {
    let total = value(columns.total, host);
    if !reported(total) {
        rejections.reject(host, "reports no physical memory");
        return;
    }

    let free = value(columns.free, host);
    let pending = value(columns.pending, host);
    let why = Why {
        rejections,
        host,
        pending,
    };
    // oVirt fails only a negative figure (pending placements claimed more
    // than was free); with none free, swap may still hold the VM.
    if free.is_nan() || free < 0.0 {
        return why.reject(["no free memory", "no free memory ({} MiB pending)"], &[]);
    }
    let swap_free = float::max(value(columns.swap_free, host), 0.0);
    if !covers(free + swap_free, need.memory_mib) {
        let (need, free) = (mib(need.memory_mib), mib(free));
        return if swap_free > 0.0 {
            why.reject(
                [
                    "needs {} MiB, {} MiB free and {} MiB swap",
                    "needs {} MiB, {} MiB free and {} MiB swap ({} MiB pending)",
                ],
                &[need, free, mib(swap_free)],
            )
        } else {
            why.reject(
                [
                    "needs {} MiB, {} MiB free",
                    "needs {} MiB, {} MiB free ({} MiB pending)",
                ],
                &[need, free],
            )
        };
    }

    let limit = total * over_commit_percent / 100.0;
    let schedulable = limit - value(columns.committed, host) - value(columns.reserved, host);
    if !covers(schedulable, need.guaranteed_mib) {
        why.reject(
            [
                "needs {} MiB guaranteed, {} MiB schedulable at {}% over-commit",
                "needs {} MiB guaranteed, {} MiB schedulable at {}% over-commit \
                 ({} MiB pending)",
            ],
            &[
                mib(need.guaranteed_mib),
                mib(float::max(schedulable, 0.0)),
                over_commit_percent,
            ],
        );
    }
}

/// One host's rejection. Pending placements explain a shortfall that the
/// engine's figures do not show yet, so every reason names them when
/// there are any.
struct Why<'r> {
    rejections: &'r mut Rejections,
    host: u32,
    pending: f64,
}

impl Why<'_> {
    /// Rejects for `plain` with `figures`, or, with memory pending, for
    /// `with_pending` with the pending MiB as one more figure.
    fn reject(self, [plain, with_pending]: [&str; 2], figures: &[f64]) {
        let mut all = [0.0; 4];
        all[..figures.len()].copy_from_slice(figures);
        let (template, count) = if self.pending > 0.0 {
            all[figures.len()] = mib(self.pending);
            (with_pending, figures.len() + 1)
        } else {
            (plain, figures.len())
        };
        if count == 0 {
            self.rejections.reject(self.host, template);
        } else {
            self.rejections
                .reject_with(self.host, template, &all[..count]);
        }
    }
}

/// A MiB figure as the reasons show it: whole, ties to even. The host
/// writes a figure as the shortest decimal that reads back as it, which
/// for a whole number below 2^53 MiB (every real host) is its digits, as
/// `{:.0}` wrote them when this unit formatted its own sentences.
fn mib(figure: f64) -> f64 {
    figure.round_ties_even()
}

sandpiper_guest::export_unit!(MemoryFilter: filter);
