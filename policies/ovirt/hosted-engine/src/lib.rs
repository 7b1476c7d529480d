//! `HA`: places the hosted-engine VM by the hosts' hosted-engine HA score,
//! hard (filter) and soft (score).
//!
//! oVirt has a filter and a weight named `HA` (reference notes §2.1, §2.2);
//! a policy puts this one unit in either slot or both. Both only concern
//! the hosted-engine VM; every other VM passes the filter and weighs 1
//! everywhere.
//!
//! **Filter**, from `HostedEngineHAClusterFilterPolicyUnit`: a host must be
//! configured for the hosted engine and have a positive HA score; when the
//! engine VM migrates, the score must also be more than its current host's
//! score minus 800, so it only moves to a clearly healthier host.
//!
//! **Score**, from `HostedEngineHAClusterWeightPolicyUnit`: `1000 −
//! round(score × 1000 / 3400)` (oVirt scales the maximum HA score, 3400,
//! onto `MaxSchedulerWeight`, in `float`, as here). Lower is better.
//!
//! Data: the VM's `hosted-engine` flag and `current-host`; the host
//! `hosted-engine` flag and `ha-score` column.
//!
//! Where we differ from oVirt: oVirt drops the 800-point margin when the
//! current host is in hosted-engine *global maintenance*; our inventory
//! has no such flag, so the margin always applies to a migration.

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::scores::java_round;
use sandpiper_ovirt::{MAX_SCHEDULER_WEIGHT, flag, value};

/// oVirt's `MIGRATION_THRESHOLD_SCORE`: a migrating engine VM needs a host
/// scoring more than its current host minus this.
pub const MIGRATION_THRESHOLD_SCORE: f64 = 800.0;
/// oVirt's `HostedEngineMaximumHighAvailabilityScore`.
pub const MAX_HA_SCORE: f32 = 3400.0;
/// The weight every host gets for a VM that is not the hosted engine.
pub const DEFAULT_WEIGHT: f64 = 1.0;

/// The `HA` filter and score.
pub struct HostedEngineHa;

impl Unit for HostedEngineHa {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "HA",
            "For the hosted-engine VM: as a filter, only hosted-engine hosts with a positive HA \
             score (more than the current host's minus 800 when migrating); as a weight, higher \
             HA scores are preferred.",
        )
        .with_score_order(ScoreOrder::LowerIsBetter)
        .applies_to([RequestProperty::HostedEngine])
    }
}

impl Filter for HostedEngineHa {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        if !vm.hosted_engine {
            return rejections.into_vec();
        }
        let hosts = cx.hosts();
        let scores = hosts.metric(HostMetric::HaScore);
        let configured = hosts.flags(HostFlag::HostedEngine);
        let min_score = vm.current_host.map_or(0.0, |current| {
            let current = value(scores, current);
            if current.is_finite() {
                float::max(current - MIGRATION_THRESHOLD_SCORE, 0.0)
            } else {
                0.0
            }
        });
        let low = rejections.reason(format!(
            "HA score not above {min_score}, the current host's score minus \
             {MIGRATION_THRESHOLD_SCORE}"
        ));
        for host in hosts.candidates(candidates) {
            let h = host.index();
            let score = value(scores, h);
            if !flag(configured, h) {
                rejections.reject(h, "not a hosted-engine host");
            } else if score.is_nan() || score <= 0.0 {
                rejections.reject(h, "hosted-engine HA score is not positive");
            } else if score <= min_score {
                rejections.reject_for(h, low);
            }
        }
        rejections.into_vec()
    }
}

impl Score for HostedEngineHa {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        if !cx.vm().hosted_engine {
            return Scores::new(vec![DEFAULT_WEIGHT; candidates.len()]);
        }
        let scores = cx.hosts().metric(HostMetric::HaScore);
        // oVirt: `float ratio = 1000f / 3400`, `Math.round(score * ratio)`.
        let ratio = MAX_SCHEDULER_WEIGHT as f32 / MAX_HA_SCORE;
        Scores::new(
            candidates
                .iter()
                .map(|&host| {
                    let score = value(scores, host);
                    let score = if score.is_finite() { score } else { 0.0 };
                    let scaled = f64::from(score as f32 * ratio);
                    MAX_SCHEDULER_WEIGHT - java_round(scaled)
                })
                .collect(),
        )
    }
}

sandpiper_guest::export_unit!(HostedEngineHa: filter, score);
