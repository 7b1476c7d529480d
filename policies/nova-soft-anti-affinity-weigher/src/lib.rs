//! `ServerGroupSoftAntiAffinityWeigher`: prefers hosts running fewer members of
//! the VM's soft-anti-affinity server group.
//!
//! Behaviour from Nova's `nova/scheduler/weights/affinity.py` (reference
//! notes §1.2): when the VM's server group has the `soft-anti-affinity` policy,
//! the raw weight is minus the number of the group's members on the host;
//! otherwise 0 everywhere. Higher is better, no `minval`; Nova's
//! `soft_anti_affinity_weight_multiplier` (default 1.0) is the policy factor.
//!
//! Data: Nova's group is the VM's group with scope `vms`, `positive`
//! false, and not `enforcing` (a soft rule); its hosts list a host once
//! per member running there, pending placements included. Nova counts the
//! instance itself on its current host during a move; our group lists the
//! *other* members, so it does not. A VM in several such groups (Nova
//! allows one) sums them, each weighted by its `priority` (1 by default,
//! which is Nova's count).

use sandpiper_guest::model::GroupScope;
use sandpiper_guest::prelude::*;

/// The `ServerGroupSoftAntiAffinityWeigher` score.
pub struct SoftAntiAffinityWeigher;

impl Unit for SoftAntiAffinityWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "ServerGroupSoftAntiAffinityWeigher",
            "Prefers hosts running fewer members of the VM's soft-anti-affinity server group \
             (Nova's ServerGroupSoftAntiAffinityWeigher).",
        )
        .with_score_order(ScoreOrder::HigherIsBetter)
    }
}

impl Score for SoftAntiAffinityWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let host_count = cx.hosts().len();
        let mut weights = vec![0.0_f64; host_count];
        for group in &cx.vm().groups {
            if group.scope != GroupScope::Vms || group.positive || group.enforcing {
                continue;
            }
            let priority = if group.priority.is_finite() {
                group.priority
            } else {
                1.0
            };
            for &host in &group.hosts {
                if let Some(weight) = weights.get_mut(host as usize) {
                    *weight -= priority;
                }
            }
        }
        let values = candidates
            .iter()
            .map(|&host| weights.get(host as usize).copied().unwrap_or(0.0))
            .collect();
        Scores::new(values)
    }
}

sandpiper_guest::export_unit!(SoftAntiAffinityWeigher: score);
