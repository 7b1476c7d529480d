//! `RAMWeigher`: prefers hosts with more free RAM (Nova's RAMWeigher: raw
//! weight free RAM, minval 0); `reverse` stacks instead.
//!
//! Behaviour from Nova's `nova/scheduler/weights/ram.py` (reference notes
//! §1.2): the raw weight is the host's free RAM (`memory-free-mib`, Nova's
//! `free_ram_mb`, which over-commit can make negative). Scores are the raw
//! weights, as `sandpiper_nova_ops::weighers` explains; the pipeline's
//! normalised mode maps them onto [0, 1] as Nova's `normalize` does.
//!
//! Mapping: Nova's `ram_weight_multiplier` (default 1.0) is the policy factor;
//! a negative multiplier (stacking) is `reverse = true`. Nova's `minval` (0):
//! negative raw weights count as 0 and 0 is the bottom of the range.
//!
//! Not carried over: Nova's per-aggregate override of the multiplier.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::params::REVERSE;
use sandpiper_nova_ops::weighers;

/// Nova's `minval` for this weigher.
const MINVAL: Option<f64> = Some(0.0);

/// The `RAMWeigher` score.
pub struct RamWeigher;

impl Unit for RamWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "RAMWeigher",
            "Prefers hosts with more free RAM (Nova's RAMWeigher: raw weight free RAM, minval \
             0); `reverse` stacks instead.",
        )
        .with_score_order(ScoreOrder::HigherIsBetter)
        .with_param(REVERSE.spec())
        .per_host()
    }
}

impl Score for RamWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let free = cx.hosts().metric(HostMetric::MemoryFreeMib);
        weighers::by_host(cx, candidates, MINVAL, |row| {
            free.get(row).copied().unwrap_or(f64::NAN)
        })
    }
}

sandpiper_guest::export_unit!(RamWeigher: score);
