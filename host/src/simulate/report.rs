//! The simulation report: what `sandpiper simulate -o json` prints, what
//! `POST /api/v1/simulations` answers and what the console draws, one
//! type. Everything in it is a function of the inputs (no clock, no hash
//! order), and figures are rounded to six decimals, so the same inputs
//! give byte-identical JSON.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The whole report: the trace replayed, and one entry per policy in the
/// order they were named.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Report {
    pub trace: TraceSummary,
    /// Hosts in the starting cluster.
    pub hosts: usize,
    pub policies: Vec<PolicyReport>,
}

/// The trace a report replayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TraceSummary {
    pub events: usize,
    /// The generator's seed; null for a trace read from a file or a body.
    pub seed: Option<u64>,
    /// How long the replay ran, seconds of trace time.
    pub duration_s: u64,
}

/// One policy's replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PolicyReport {
    /// The built-in policy's name, the policy file's path, or the stored
    /// policy's name.
    pub policy: String,
    /// The stored policy's id (the API); null for a built-in or file.
    pub policy_id: Option<Uuid>,
    /// Arrivals placed.
    pub placed: usize,
    /// Arrivals no host took.
    pub refused: usize,
    /// Why arrivals were refused: each refused arrival counts once under
    /// every distinct `unit: reason` its decision gave; most frequent
    /// first, at most [`MAX_REFUSAL_REASONS`].
    pub refusals: Vec<Refusal>,
    /// Migrations the policy's balance unit made.
    pub migrations: usize,
    /// The cluster sampled every `sample_every_s`, from time 0 to the end.
    pub samples: Vec<Sample>,
    /// The cluster at the end of the trace.
    #[serde(rename = "final")]
    pub last: Sample,
    /// Arrivals placed on each host, in the cluster's host order (every
    /// host, zeros included).
    pub placements_per_host: Vec<HostPlacements>,
}

/// The most refusal reasons a report lists; the rest are summed under
/// `other reasons`.
pub const MAX_REFUSAL_REASONS: usize = 20;

/// A refusal reason and how many arrivals it refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Refusal {
    pub reason: String,
    pub count: usize,
}

/// The cluster at one instant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Sample {
    pub at_s: u64,
    /// VMs on hosts (pending claims included).
    pub vms: usize,
    /// Hosts with no VM: the ones an engine could power off.
    pub empty_hosts: usize,
    /// Memory utilisation over hosts: `1 - memory_free_mib / memory_total_mib`.
    pub memory: Spread,
    /// CPU utilisation over hosts: `cpu_usage_percent / 100`.
    pub cpu: Spread,
}

/// Mean, population standard deviation and maximum of a utilisation over
/// hosts, fractions 0 to 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Spread {
    pub mean: f64,
    pub stddev: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (0s for none), rounded.
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let max = values.iter().copied().fold(0.0, f64::max);
        Spread {
            mean: round(mean),
            stddev: round(variance.sqrt()),
            max: round(max),
        }
    }
}

/// Six decimals: past the precision any utilisation is measured to, and
/// short enough to read.
fn round(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

/// Placements on one host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HostPlacements {
    pub host_id: String,
    pub placements: usize,
}

impl Report {
    /// The report as the human table `sandpiper simulate` prints by
    /// default: one row per policy, the end state's figures.
    pub fn table(&self) -> String {
        let mut rows = vec![[
            "POLICY".to_owned(),
            "PLACED".to_owned(),
            "REFUSED".to_owned(),
            "MIGRATIONS".to_owned(),
            "MEM MEAN".to_owned(),
            "MEM STDDEV".to_owned(),
            "MEM MAX".to_owned(),
            "CPU STDDEV".to_owned(),
            "EMPTY HOSTS".to_owned(),
        ]];
        for p in &self.policies {
            rows.push([
                p.policy.clone(),
                p.placed.to_string(),
                p.refused.to_string(),
                p.migrations.to_string(),
                format!("{:.3}", p.last.memory.mean),
                format!("{:.3}", p.last.memory.stddev),
                format!("{:.3}", p.last.memory.max),
                format!("{:.3}", p.last.cpu.stddev),
                format!("{}/{}", p.last.empty_hosts, self.hosts),
            ]);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = format!(
            "{} events over {} s{}, {} hosts; figures at the end of the trace\n",
            self.trace.events,
            self.trace.duration_s,
            self.trace
                .seed
                .map(|s| format!(" (seed {s})"))
                .unwrap_or_default(),
            self.hosts
        );
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        for p in self.policies.iter().filter(|p| !p.refusals.is_empty()) {
            out.push_str(&format!("\n{} refused {}:\n", p.policy, p.refused));
            for r in &p.refusals {
                out.push_str(&format!("  {:>5}  {}\n", r.count, r.reason));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_population_stddev() {
        let s = Spread::of(&[0.2, 0.4, 0.6]);
        assert_eq!((s.mean, s.max), (0.4, 0.6));
        assert_eq!(s.stddev, 0.163299);
        assert_eq!(Spread::of(&[]), Spread::default());
    }
}
