//! `Compatibility-Version`: rejects hosts that do not support the VM's
//! custom compatibility version.
//!
//! Behaviour from oVirt's `CompatibilityVersionFilterPolicyUnit`
//! (reference notes §2.1), one of oVirt's mandatory filters: a VM without
//! a custom compatibility version uses the cluster's, which every host of
//! the cluster supports (no host rejected); otherwise the host's supported
//! cluster levels must contain it. The reason names the host's levels, as
//! oVirt's message does. Versions compare as text after trimming, as
//! oVirt's `Version` objects do for the `major.minor` form both sides use.
//!
//! Data: host `cluster-levels`; VM hardware `compatibility_version`.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::hardware::{HostSets, list};

/// How many of a host's levels a reason names.
const LISTED: usize = 8;

/// The `Compatibility-Version` filter.
pub struct CompatibilityVersion;

impl Unit for CompatibilityVersion {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Compatibility-Version",
            "Rejects hosts whose supported cluster levels do not include the VM's custom \
             compatibility version.",
        )
        .applies_to([RequestProperty::CompatibilityVersion])
        .per_host()
    }
}

impl Filter for CompatibilityVersion {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let wanted = cx.vm().hardware.compatibility_version.trim();
        if wanted.is_empty() {
            return rejections.into_vec();
        }
        let levels = HostSets::new(&cx.hosts(), HostLabels::ClusterLevels);
        let supported = levels.ids_where(|level| level.trim() == wanted);
        let none = format!("reports no supported cluster levels; the VM needs {wanted}");
        // Hosts reporting the same levels share one sentence.
        let mut others: Sentences<Vec<u32>> = Sentences::new();
        for host in cx.hosts().candidates(candidates) {
            let row = levels.row(host.index());
            if row
                .iter()
                .any(|&id| supported.get(id as usize).copied().unwrap_or(false))
            {
                continue;
            }
            let reason = if row.is_empty() {
                none.as_str()
            } else {
                others.get(row, || {
                    let texts: Vec<&str> = row.iter().map(|&id| levels.text(id)).collect();
                    format!(
                        "supports cluster levels {}, not the VM's {wanted}",
                        list(&texts, LISTED)
                    )
                })
            };
            rejections.reject(host.index(), reason);
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(CompatibilityVersion: filter);
