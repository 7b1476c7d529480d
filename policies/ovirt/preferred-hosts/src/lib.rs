//! `PreferredHosts`: when a VM starts, prefers the hosts it is dedicated to.
//!
//! Behaviour from oVirt's `PreferredHostsWeightPolicyUnit` (reference notes
//! §2.2): only while the VM starts (it runs nowhere yet) and only when it
//! has preferred hosts, every other host weighs 10,000 and a preferred one
//! 0; otherwise every host weighs 0. Lower is better. oVirt's built-in
//! policies give this unit factor 99, so in rank combination it outweighs
//! everything else.
//!
//! Data: the VM's `dedicated-hosts` (oVirt's `dedicatedVmForVdsList`) and
//! `current-host`. Reads no host column.
//!
//! oVirt returns no weights at all for a running VM, which its rank
//! selector reads as 0 for every host; we return the zeros.

use sandpiper_guest::prelude::*;

/// oVirt's weight for a host that is not preferred ("TODO externalize").
pub const NOT_PREFERRED_WEIGHT: f64 = 10_000.0;
/// The weight of a preferred host, and of every host when none is.
pub const PREFERRED_WEIGHT: f64 = 0.0;

/// The `PreferredHosts` score.
pub struct PreferredHosts;

impl Unit for PreferredHosts {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "PreferredHosts",
            "While a VM starts, gives the hosts it is dedicated to weight 0 and every other \
             host 10000.",
        )
        .with_score_order(ScoreOrder::LowerIsBetter)
        .applies_to([RequestProperty::DedicatedHosts])
        .per_host()
    }
}

impl Score for PreferredHosts {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let vm = cx.vm();
        if vm.current_host.is_some() || vm.dedicated_hosts.is_empty() {
            return Scores::new(vec![PREFERRED_WEIGHT; candidates.len()]);
        }
        let mut preferred = vm.dedicated_hosts.clone();
        preferred.sort_unstable();
        Scores::new(
            candidates
                .iter()
                .map(|host| {
                    if preferred.binary_search(host).is_ok() {
                        PREFERRED_WEIGHT
                    } else {
                        NOT_PREFERRED_WEIGHT
                    }
                })
                .collect(),
        )
    }
}

sandpiper_guest::export_unit!(PreferredHosts: score);
