//! `ServerGroupSoftAffinityWeigher`: prefers hosts running more members of the
//! VM's soft-affinity server group.
//!
//! Behaviour from Nova's `nova/scheduler/weights/affinity.py` (reference
//! notes §1.2): when the VM's server group has the `soft-affinity` policy,
//! the raw weight is the number of the group's members on the host; otherwise 0
//! everywhere. Higher is better, no `minval`; Nova's
//! `soft_affinity_weight_multiplier` (default 1.0) is the policy factor.
//!
//! Data: Nova's group is the VM's group with scope `vms`, `positive`
//! true, and not `enforcing` (a soft rule); its hosts list a host once
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

/// The `ServerGroupSoftAffinityWeigher` score.
pub struct SoftAffinityWeigher;

impl Unit for SoftAffinityWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "ServerGroupSoftAffinityWeigher",
            "Prefers hosts running more members of the VM's soft-affinity server group \
             (Nova's ServerGroupSoftAffinityWeigher).",
        )
        .with_score_order(ScoreOrder::HigherIsBetter)
        .applies_to([RequestProperty::Groups])
        .per_host()
    }
}

impl Score for SoftAffinityWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        Scores::new(soft_group_members(cx, candidates, true))
    }
}

sandpiper_guest::export_unit!(SoftAffinityWeigher: score);
