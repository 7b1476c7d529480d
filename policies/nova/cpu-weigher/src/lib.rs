//! `CPUWeigher`: prefers hosts with more free vCPUs at cpu_allocation_ratio
//! (Nova's CPUWeigher: minval 0); `reverse` stacks instead.
//!
//! Behaviour from Nova's `nova/scheduler/weights/cpu.py` (reference notes
//! §1.2): the raw weight is the host's free vCPUs, `vcpus_total ×
//! cpu_allocation_ratio − vcpus_used` (`cpu-threads`, else `cpu-cores`;
//! `vcpus-used`). Scores are the raw weights, as `sandpiper_nova_ops::weighers`
//! explains; the pipeline's normalised mode maps them onto [0, 1] as Nova's
//! `normalize` does.
//!
//! Mapping: Nova's `cpu_weight_multiplier` (default 1.0) is the policy factor;
//! a negative multiplier (stacking) is `reverse = true`. The ratio is the
//! host's named metric `cpu_allocation_ratio` (Nova's per-compute-node ratio),
//! else the parameter of that name, shared with `CoreFilter`. Nova's
//! `minval` (0): negative raw weights count as 0 and 0 is the bottom of the
//! range.
//!
//! Not carried over: Nova's per-aggregate override of the multiplier.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::capacity::host_ratio;
use sandpiper_nova_ops::host_state::vcpus_total;
use sandpiper_nova_ops::params::CPU_ALLOCATION_RATIO;
use sandpiper_nova_ops::params::REVERSE;
use sandpiper_nova_ops::weighers;

/// Nova's `minval` for this weigher.
const MINVAL: Option<f64> = Some(0.0);

/// The `CPUWeigher` score.
pub struct CpuWeigher;

impl Unit for CpuWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CPUWeigher",
            "Prefers hosts with more free vCPUs at cpu_allocation_ratio (Nova's CPUWeigher: \
             minval 0); `reverse` stacks instead.",
        )
        .with_score_order(ScoreOrder::HigherIsBetter)
        .with_param(CPU_ALLOCATION_RATIO.spec())
        .with_param(REVERSE.spec())
        .per_host()
    }
}

impl Score for CpuWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let Ok(ratio) = cx.params().f64(CPU_ALLOCATION_RATIO.name) else {
            return weighers::scores(vec![0.0; candidates.len()], MINVAL, false);
        };
        let hosts = cx.hosts();
        let (threads, cores, used) = (
            hosts.metric(HostMetric::CpuThreads),
            hosts.metric(HostMetric::CpuCores),
            hosts.metric(HostMetric::VcpusUsed),
        );
        let host_ratios = hosts.named_metric(CPU_ALLOCATION_RATIO.name);
        let at = |column: &[f64], row: usize| column.get(row).copied().unwrap_or(f64::NAN);
        weighers::by_host(cx, candidates, MINVAL, |row| {
            let ratio = host_ratio(&host_ratios, row, ratio);
            vcpus_total(at(threads, row), at(cores, row)) * ratio - at(used, row)
        })
    }
}

sandpiper_guest::export_unit!(CpuWeigher: score);
