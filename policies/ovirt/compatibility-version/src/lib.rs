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
use sandpiper_ovirt::hardware::{host_set, list};

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
        for host in cx.hosts().candidates(candidates) {
            let levels = host_set(&host, HostLabels::ClusterLevels);
            if levels.iter().any(|level| level.trim() == wanted) {
                continue;
            }
            let reason = if levels.is_empty() {
                format!("reports no supported cluster levels; the VM needs {wanted}")
            } else {
                format!(
                    "supports cluster levels {}, not the VM's {wanted}",
                    list(&levels, LISTED)
                )
            };
            rejections.reject(host.index(), reason);
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(CompatibilityVersion: filter);
