//! `IoOpsWeigher`: prefers hosts with fewer concurrent I/O operations (Nova's
//! IoOpsWeigher, minval 0, default multiplier -1.0); `reverse` prefers busy
//! hosts.
//!
//! Behaviour from Nova's `nova/scheduler/weights/io_ops.py` (reference notes
//! §1.2): the raw weight is the host's instances building, resizing or
//! migrating (`io-ops`, Nova's `num_io_ops`). Scores are the raw weights, as
//! `sandpiper_nova_ops::weighers` explains; the pipeline's normalised mode maps
//! them onto [0, 1] as Nova's `normalize` does.
//!
//! Mapping: Nova's default `io_ops_weight_multiplier` is -1.0, so the unit is
//! lower-is-better and the policy factor is the multiplier's magnitude (1); a
//! positive multiplier (prefer busy hosts) is `reverse = true`. Nova's `minval`
//! (0): negative raw weights count as 0 and 0 is the bottom of the range.
//!
//! Not carried over: Nova's per-aggregate override of the multiplier.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::params::REVERSE;
use sandpiper_nova_ops::weighers;

/// Nova's `minval` for this weigher.
const MINVAL: Option<f64> = Some(0.0);

/// The `IoOpsWeigher` score.
pub struct IoOpsWeigher;

impl Unit for IoOpsWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "IoOpsWeigher",
            "Prefers hosts with fewer concurrent I/O operations (Nova's IoOpsWeigher, minval \
             0, default multiplier -1.0); `reverse` prefers busy hosts.",
        )
        .with_score_order(ScoreOrder::LowerIsBetter)
        .with_param(REVERSE.spec())
        .per_host()
    }
}

impl Score for IoOpsWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let io_ops = cx.hosts().metric(HostMetric::IoOps);
        weighers::by_host(cx, candidates, MINVAL, |row| {
            io_ops.get(row).copied().unwrap_or(f64::NAN)
        })
    }
}

sandpiper_guest::export_unit!(IoOpsWeigher: score);
