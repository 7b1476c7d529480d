//! `VmToHostsAffinityGroups`: VM-to-host affinity, hard (filter) and soft
//! (score).
//!
//! oVirt has a filter and a weight of this name (reference notes §2.1,
//! §2.2); a policy puts this one unit in either slot or both. Only the VM's
//! groups of scope `hosts` count; each group's `hosts` are its member hosts.
//!
//! **Filter**, from `VmToHostAffinityFilterPolicyUnit`, over the
//! *enforcing* groups: a positive group rejects every host outside it, a
//! negative group every host in it. The reason names the first group the
//! host breaks.
//!
//! **Score**, from `VmToHostAffinityWeightPolicyUnit`, over the
//! *non-enforcing* groups: a host breaks a positive group when it is not a
//! member and a negative group when it is. Hosts are ordered by the
//! priorities of the groups they break (high to low, compared element by
//! element, fewer first); the weight is 1 + the host's competition rank.
//! Lower is better.
//!
//! Where we differ from oVirt: oVirt also derives implicit groups from
//! host and VM labels (clusters ≥ 4.4); the engine sends those as ordinary
//! groups.

use sandpiper_guest::model::{GroupScope, VmGroup};
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::scores::{competition_ranks, lexicographic};

/// oVirt's `DEFAULT_SCORE`: the best weight.
pub const BEST_WEIGHT: f64 = 1.0;

/// The `VmToHostsAffinityGroups` filter and score.
pub struct VmToHostsAffinity;

impl Unit for VmToHostsAffinity {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "VmToHostsAffinityGroups",
            "VM-to-host affinity groups: as a filter, hosts outside a positive or inside a \
             negative enforcing group are rejected; as a weight, hosts breaking fewer and \
             lower-priority soft groups are preferred.",
        )
        .with_score_order(ScoreOrder::LowerIsBetter)
        .applies_to([RequestProperty::Groups])
    }
}

/// The VM's groups of host scope that are (or are not) enforcing.
fn host_groups(vm: &Vm, enforcing: bool) -> impl Iterator<Item = &VmGroup> {
    vm.groups
        .iter()
        .filter(move |g| g.scope == GroupScope::Hosts && g.enforcing == enforcing)
}

/// A group's member hosts as a lookup table over the snapshot.
fn members(group: &VmGroup, host_count: usize) -> Vec<bool> {
    let mut set = vec![false; host_count];
    for &host in &group.hosts {
        if let Some(slot) = set.get_mut(host as usize) {
            *slot = true;
        }
    }
    set
}

fn is_member(set: &[bool], host: u32) -> bool {
    set.get(host as usize).copied().unwrap_or(false)
}

impl Filter for VmToHostsAffinity {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let host_count = cx.hosts().len();
        for group in host_groups(cx.vm(), true) {
            let set = members(group, host_count);
            let reason = rejections.reason(if group.positive {
                format!("not in positive host affinity group '{}'", group.name)
            } else {
                format!("in negative host affinity group '{}'", group.name)
            });
            for &host in candidates {
                if is_member(&set, host) != group.positive {
                    rejections.reject_for(host, reason);
                }
            }
        }
        rejections.into_vec()
    }
}

impl Score for VmToHostsAffinity {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let groups: Vec<&VmGroup> = host_groups(cx.vm(), false).collect();
        if groups.is_empty() {
            return Scores::new(vec![BEST_WEIGHT; candidates.len()]);
        }
        let host_count = cx.hosts().len();
        let mut broken: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
        for group in groups {
            let set = members(group, host_count);
            for (priorities, &host) in broken.iter_mut().zip(candidates) {
                if is_member(&set, host) != group.positive {
                    priorities.push(group.priority);
                }
            }
        }
        for priorities in &mut broken {
            priorities.sort_by(|a, b| b.total_cmp(a));
        }
        let ranks = competition_ranks(&broken, |a, b| lexicographic(a, b));
        Scores::new(
            ranks
                .into_iter()
                .map(|rank| BEST_WEIGHT + f64::from(rank))
                .collect(),
        )
    }
}

sandpiper_guest::export_unit!(VmToHostsAffinity: filter, score);
