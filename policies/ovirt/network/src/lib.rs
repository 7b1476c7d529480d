//! `Network`: rejects hosts that miss a network the VM's interfaces need.
//!
//! Behaviour from oVirt's `NetworkPolicyUnit` (reference notes §2.1): every
//! network required by the VM's vNICs must be attached to the host; the
//! reason names the missing networks, as oVirt's `$networkNames` does.
//!
//! Data: the VM's `networks` and the host `networks` labels.
//!
//! Where we differ from oVirt, all from data our model does not carry: the
//! engine decides which of a VM's networks are required (oVirt skips
//! unplugged vNICs, external networks, passthrough vNICs and, with
//! `OnlyRequiredNetworksMandatoryForVdsSelection`, non-required networks),
//! so the VM's `networks` list is taken as exactly the required ones. The
//! cluster display network and SR-IOV virtual-function checks are not done;
//! an engine that needs the display network can list it among the VM's
//! networks.

use sandpiper_guest::prelude::*;

/// Most missing networks a reason names; the rest are counted, so a VM with
/// many networks cannot make reasons (and their crossings) unbounded.
pub const MAX_NAMED_NETWORKS: usize = 8;

/// The `Network` filter.
pub struct NetworkFilter;

impl Unit for NetworkFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Network",
            "Rejects hosts that are not attached to every network the VM's interfaces need.",
        )
        .applies_to([RequestProperty::Networks])
        .per_host()
    }
}

impl Filter for NetworkFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let mut needed: Vec<&str> = cx.vm().networks.iter().map(String::as_str).collect();
        needed.sort_unstable();
        needed.dedup();
        if needed.is_empty() {
            return rejections.into_vec();
        }
        let labels = cx.hosts().labels(HostLabels::Networks);
        // Each needed network's position among the column's interned
        // strings (`None`: no host has it), so hosts compare integers.
        let interned: Vec<Option<u32>> = needed
            .iter()
            .map(|name| {
                labels
                    .strings
                    .iter()
                    .position(|s| s == name)
                    .map(|i| i as u32)
            })
            .collect();
        let mut missing: Vec<usize> = Vec::with_capacity(needed.len());
        for host in cx.hosts().candidates(candidates) {
            let row = host.index() as usize;
            let attached = labels.keys_of(row);
            missing.clear();
            missing.extend(
                interned
                    .iter()
                    .enumerate()
                    .filter(|(_, key)| key.is_none_or(|k| !attached.contains(&k)))
                    .map(|(i, _)| i),
            );
            if !missing.is_empty() {
                rejections.reject(host.index(), reason(&needed, &missing));
            }
        }
        rejections.into_vec()
    }
}

/// "missing networks: a, b" (at most [`MAX_NAMED_NETWORKS`] named).
fn reason(needed: &[&str], missing: &[usize]) -> String {
    let mut text = String::from("missing networks: ");
    for (n, &i) in missing.iter().take(MAX_NAMED_NETWORKS).enumerate() {
        if n > 0 {
            text.push_str(", ");
        }
        text.push_str(needed[i]);
    }
    if missing.len() > MAX_NAMED_NETWORKS {
        text.push_str(&format!(" and {} more", missing.len() - MAX_NAMED_NETWORKS));
    }
    text
}

sandpiper_guest::export_unit!(NetworkFilter: filter);
