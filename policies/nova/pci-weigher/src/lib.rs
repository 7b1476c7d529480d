//! `PCIWeigher`: keeps hosts with free PCI devices for the requests that
//! need them (Nova's PCIWeigher).
//!
//! Behaviour from Nova's `nova/scheduler/weights/pci.py`: the raw weight is
//! `MAX_DEVS - min(free, MAX_DEVS - 1)` with `MAX_DEVS` 100 and `free` the
//! host's free PCI devices over all its pools (the pool column `free`), so a
//! host with fewer free devices weighs more, whether or not the VM asks
//! for devices: without, it avoids hosts with devices; with, it stacks
//! (hosts without any matching device are already filtered out). Scores
//! are the raw weights, as `sandpiper_nova_ops::weighers` explains; the
//! pipeline's normalised mode maps them onto [0, 1] as Nova's `normalize`
//! does (no `minval`).
//!
//! Mapping: Nova's `pci_weight_multiplier` (default 1.0, at least 0.0) is
//! the policy factor, as for every Nova weigher here; a multiplier of 0
//! is leaving the unit out. Nova allows no negative multiplier, so there
//! is no `reverse`.
//!
//! Not carried over: Nova's per-aggregate override of the multiplier.

use sandpiper_guest::float;
use sandpiper_guest::model::hardware::{PoolColumn, row_range};
use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::weighers;

/// Nova's `MAX_DEVS`.
const MAX_DEVS: f64 = 100.0;

/// The `PCIWeigher` score.
pub struct PciWeigher;

impl Unit for PciWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "PCIWeigher",
            "Prefers hosts with fewer free PCI devices, keeping hosts with devices for the \
             requests that need them (Nova's PCIWeigher, raw weight 100 - min(free, 99)).",
        )
        .with_score_order(ScoreOrder::HigherIsBetter)
        .per_host()
    }
}

impl Score for PciWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        // The two columns it reads, not the pools' nine.
        let inventory = cx.inventory();
        let offsets = inventory.pci_pool_offsets();
        let free = inventory.pci_pool_column(PoolColumn::Free);
        let values = candidates
            .iter()
            .map(|&host| {
                let free: u32 = row_range(offsets, host as usize)
                    .map(|p| free.get(p).copied().unwrap_or(0))
                    .sum();
                MAX_DEVS - float::min(f64::from(free), MAX_DEVS - 1.0)
            })
            .collect();
        weighers::scores(values, None, false)
    }
}

sandpiper_guest::export_unit!(PciWeigher: score);
