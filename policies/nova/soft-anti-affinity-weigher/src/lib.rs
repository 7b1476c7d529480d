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
//!
//! Per-host: where the members run comes from the request's group, not
//! from other hosts' VMs.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::weighers::soft_group_members;

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
        .applies_to([RequestProperty::Groups])
        .per_host()
    }
}

impl Score for SoftAntiAffinityWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        // `0.0 - n`, not `-n`: a host with no member weighs +0, as before.
        let members = soft_group_members(cx, candidates, false);
        Scores::new(members.into_iter().map(|n| 0.0 - n).collect())
    }
}

sandpiper_guest::export_unit!(SoftAntiAffinityWeigher: score);
