//! `MDevice`: rejects hosts without free mediated devices (vGPUs) of the
//! types the VM needs.
//!
//! Behaviour from oVirt's `MDevicePolicyUnit` (reference notes §2.1), one
//! of oVirt's mandatory filters: a VM needing no mediated device passes
//! every host; otherwise a host offering none of a needed type is rejected
//! ("missing"), and one whose devices of that type have no instance left
//! is rejected ("unavailable"), naming the types.
//!
//! Differs: oVirt asks only for one free instance per type however many
//! the VM needs; here a type listed `n` times (the WIT repeats a type once
//! per instance) needs `n` free instances over the host's devices of that
//! type, so two vGPUs of one profile are not placed where one is left.
//!
//! Data: `mdev-types` (offers with free instances); VM hardware
//! `mdev_types`.

use std::collections::BTreeMap;

use sandpiper_guest::prelude::*;

/// The `MDevice` filter.
pub struct MDevice;

impl Unit for MDevice {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "MDevice",
            "Rejects hosts that offer no mediated device (vGPU) of a type the VM needs, or \
             too few free instances of it.",
        )
        .applies_to([RequestProperty::MdevTypes])
        .per_host()
    }
}

impl Filter for MDevice {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        // Type → instances needed, in name order.
        let mut needed: BTreeMap<&str, u32> = BTreeMap::new();
        for name in &cx.vm().hardware.mdev_types {
            *needed.entry(name.trim()).or_insert(0) += 1;
        }
        if needed.is_empty() {
            return rejections.into_vec();
        }
        let offers = cx.inventory().mdev_offers();
        for &host in candidates {
            let mut offered: BTreeMap<&str, u32> = BTreeMap::new();
            for entry in offers.host_offers(host as usize) {
                let name = offers.text(offers.names.get(entry).copied().unwrap_or(u32::MAX));
                if needed.contains_key(name) {
                    let free = offers.free.get(entry).copied().unwrap_or(0);
                    let total = offered.entry(name).or_insert(0);
                    *total = total.saturating_add(free);
                }
            }
            let missing: Vec<&str> = needed
                .keys()
                .copied()
                .filter(|name| !offered.contains_key(name))
                .collect();
            if !missing.is_empty() {
                rejections.reject(
                    host,
                    format!("has no mediated device of type {}", missing.join(", ")),
                );
                continue;
            }
            let short: Vec<String> = needed
                .iter()
                .filter_map(|(name, &want)| {
                    let free = offered[name];
                    (free < want).then(|| format!("{name} (needs {want}, {free} free)"))
                })
                .collect();
            if !short.is_empty() {
                rejections.reject(
                    host,
                    format!(
                        "too few free mediated device instances: {}",
                        short.join(", ")
                    ),
                );
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(MDevice: filter);
