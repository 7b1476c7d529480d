//! `VmAffinityGroups`: VM-to-VM affinity, hard (filter) and soft (score).
//!
//! oVirt has a filter and a weight of this name (reference notes §2.1,
//! §2.2); a policy puts this one unit in either slot or both, as oVirt's
//! built-in policies do. Only the VM's groups of scope `vms` count; each
//! group's `hosts` are where its other members run, pending placements
//! included (oVirt adds pending VMs to the running ones), a host repeating
//! once per member.
//!
//! **Filter**, from `VmAffinityFilterPolicyUnit`, over the *enforcing*
//! groups:
//! * positive groups: the acceptable hosts are those running a member of
//!   any positive group; if no member runs anywhere, every host is
//!   acceptable; the others are rejected;
//! * negative groups: hosts running a member of any negative group are
//!   rejected (among the acceptable ones; a host failing both is reported
//!   for the positive rule, as oVirt reports it first).
//!
//! **Score**, from `VmAffinityWeightPolicyUnit`, over *all* the VM's groups
//! (oVirt's weight does not skip enforcing ones): a host breaks a positive
//! group when no member runs there and a negative group when one does.
//! Hosts are ordered by the priorities of the groups they break (sorted
//! high to low, compared element by element, fewer first: breaking three
//! priority-1 groups is better than breaking one priority-2 group), then
//! by how many positive-group members they run (more is better); the
//! weight is 1 + the host's competition rank in that order. Lower is better.
//!
//! Where we differ from oVirt, from data our model does not carry:
//! * oVirt's second key is the number of *non-migratable* positive peers on
//!   the host; we cannot tell which members are migratable, so that key is
//!   0 everywhere and only the total count is compared;
//! * oVirt counts each peer VM once even when it is in two positive groups;
//!   we see hosts per group, so such a peer counts once per group;
//! * oVirt's filter also schedules positive enforcing groups together and
//!   can be told to ignore hard affinity (`ignoreHardVmToVmAffinity`); both
//!   are the engine's business, not a unit's.

use sandpiper_guest::model::{GroupScope, VmGroup};
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::scores::{competition_ranks, lexicographic};

/// oVirt's `DEFAULT_SCORE`: the best weight.
pub const BEST_WEIGHT: f64 = 1.0;

/// Most group names a reason lists; more are counted.
pub const MAX_NAMED_GROUPS: usize = 4;

/// The `VmAffinityGroups` filter and score.
pub struct VmAffinity;

impl Unit for VmAffinity {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "VmAffinityGroups",
            "VM-to-VM affinity groups: as a filter, hosts breaking an enforcing group are \
             rejected; as a weight, hosts breaking fewer and lower-priority groups are preferred.",
        )
        .with_score_order(ScoreOrder::LowerIsBetter)
        .applies_to([RequestProperty::Groups])
    }
}

/// The VM's groups of VM scope.
fn vm_groups(vm: &Vm) -> impl Iterator<Item = &VmGroup> {
    vm.groups.iter().filter(|g| g.scope == GroupScope::Vms)
}

/// A host membership set over the snapshot.
struct HostSet(Vec<bool>);

impl HostSet {
    fn new(host_count: usize) -> Self {
        HostSet(vec![false; host_count])
    }

    fn insert(&mut self, host: u32) {
        if let Some(slot) = self.0.get_mut(host as usize) {
            *slot = true;
        }
    }

    fn contains(&self, host: u32) -> bool {
        self.0.get(host as usize).copied().unwrap_or(false)
    }
}

impl Filter for VmAffinity {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let enforcing: Vec<&VmGroup> = vm_groups(cx.vm()).filter(|g| g.enforcing).collect();
        if enforcing.is_empty() {
            return rejections.into_vec();
        }
        let host_count = cx.hosts().len();
        let mut acceptable = HostSet::new(host_count);
        let mut any_positive_host = false;
        let mut positive_names: Vec<&str> = Vec::new();
        for group in enforcing.iter().filter(|g| g.positive) {
            for &host in &group.hosts {
                acceptable.insert(host);
                any_positive_host = true;
            }
            if !group.hosts.is_empty() {
                positive_names.push(&group.name);
            }
        }
        let negative: Vec<&VmGroup> = enforcing.iter().copied().filter(|g| !g.positive).collect();
        let mut unacceptable = HostSet::new(host_count);
        for group in &negative {
            for &host in &group.hosts {
                unacceptable.insert(host);
            }
        }
        let positive_reason = rejections.reason(format!(
            "positive affinity: no member of {} runs here",
            names(positive_names.iter().copied())
        ));
        // One sentence per distinct set of broken groups.
        let mut negative_reasons: Sentences<Vec<usize>> = Sentences::new();
        let mut broken: Vec<usize> = Vec::new();
        for &host in candidates {
            if any_positive_host && !acceptable.contains(host) {
                rejections.reject_for(host, positive_reason);
            } else if unacceptable.contains(host) {
                broken.clear();
                broken.extend((0..negative.len()).filter(|&i| negative[i].hosts.contains(&host)));
                let reason = negative_reasons.get(broken.as_slice(), || {
                    let groups = broken.iter().map(|&i| negative[i].name.as_str());
                    format!("negative affinity: a member of {} runs here", names(groups))
                });
                rejections.reject(host, reason);
            }
        }
        rejections.into_vec()
    }
}

/// Group names for a reason: `'a', 'b'` (at most [`MAX_NAMED_GROUPS`]).
fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    let mut text = names
        .iter()
        .take(MAX_NAMED_GROUPS)
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > MAX_NAMED_GROUPS {
        text.push_str(&format!(" and {} more", names.len() - MAX_NAMED_GROUPS));
    }
    let noun = if names.len() == 1 { "group" } else { "groups" };
    format!("{noun} {text}")
}

/// One candidate's standing for the weight.
struct Standing {
    /// Priorities of the groups it breaks, high to low.
    broken: Vec<f64>,
    /// Positive-group members running on it.
    positive_members: u32,
}

impl Score for VmAffinity {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let groups: Vec<&VmGroup> = vm_groups(cx.vm()).collect();
        if groups.is_empty() {
            return Scores::new(vec![BEST_WEIGHT; candidates.len()]);
        }
        let host_count = cx.hosts().len();
        let mut positive_members = vec![0u32; host_count];
        let mut standings: Vec<Standing> = candidates
            .iter()
            .map(|_| Standing {
                broken: Vec::new(),
                positive_members: 0,
            })
            .collect();
        for group in &groups {
            let mut members = HostSet::new(host_count);
            for &host in &group.hosts {
                members.insert(host);
                if group.positive
                    && let Some(count) = positive_members.get_mut(host as usize)
                {
                    *count += 1;
                }
            }
            for (standing, &host) in standings.iter_mut().zip(candidates) {
                if members.contains(host) != group.positive {
                    standing.broken.push(group.priority);
                }
            }
        }
        for (standing, &host) in standings.iter_mut().zip(candidates) {
            standing.broken.sort_by(|a, b| b.total_cmp(a));
            standing.positive_members = positive_members.get(host as usize).copied().unwrap_or(0);
        }
        let ranks = competition_ranks(&standings, |a, b| {
            lexicographic(&a.broken, &b.broken)
                .then_with(|| b.positive_members.cmp(&a.positive_members))
        });
        Scores::new(
            ranks
                .into_iter()
                .map(|rank| BEST_WEIGHT + f64::from(rank))
                .collect(),
        )
    }
}

sandpiper_guest::export_unit!(VmAffinity: filter, score);
