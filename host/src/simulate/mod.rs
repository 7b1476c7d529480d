//! The policy simulator (docs/simulator.md): a workload of VM arrivals and
//! departures replayed against candidate policies, each on its own copy
//! of a cluster, through the real placement path with claims, and the
//! figures that tell the policies apart — placements and refusals, the
//! spread of utilisation over hosts through time, empty hosts, migrations.
//!
//! * [`trace`]: the trace format (JSON Lines or CSV) and its checks.
//! * [`mod@generate`]: the seeded trace generator.
//! * [`run`]: one policy's replay on a copy of the cluster.
//! * [`report`]: the report, its figures and its human table.
//! * [`render`]: the report as an HTML page or an SVG of charts.
//! * [`command`]: `sandpiper simulate` and `sandpiper simulate generate-trace`.
//!
//! `sandpiper simulate` ([`command`]) runs it in process with
//! the built-in units; `POST /api/v1/simulations` (`crate::api::simulations`)
//! with the stored policies. Both call [`simulate`].

pub mod command;
pub mod generate;
pub mod render;
pub mod report;
pub mod run;
pub mod trace;

pub use generate::{GenerateError, GenerateParams, VmSize, generate};
pub use report::{PolicyReport, Report, Sample, Spread, TraceSummary};
pub use run::{Candidate, Intervals, SimulateError, Start, replay};
pub use trace::{Trace, TraceError, TraceEvent};

/// The most policies one simulation compares: a report of more is no
/// longer readable, and each is a whole replay.
pub const MAX_POLICIES: usize = 8;

/// Replays `trace` against every candidate, in order, each on its own
/// copy of `start`.
pub fn simulate(
    start: &Start,
    trace: &Trace,
    candidates: &[Candidate],
    intervals: Intervals,
) -> Result<Report, SimulateError> {
    intervals.check(trace.duration_s)?;
    let policies = candidates
        .iter()
        .map(|candidate| replay(start, trace, candidate, intervals))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Report {
        trace: TraceSummary {
            events: trace.events.len(),
            seed: trace.seed,
            duration_s: trace.duration_s,
        },
        hosts: start.host_count(),
        policies,
    })
}
