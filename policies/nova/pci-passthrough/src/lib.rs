//! `PciPassthroughFilter`: rejects hosts without free PCI devices for the
//! VM's PCI requests (Nova's PciPassthroughFilter).
//!
//! Behaviour from Nova's `nova/scheduler/filters/pci_passthrough_filter.py`
//! and `PciDeviceStats.support_requests` (`nova/pci/stats.py`), here
//! `sandpiper_hardware` without NUMA cells: a VM without PCI requests
//! passes every host; otherwise each request in turn takes `count` free
//! devices from the host's pools matching one of its specs (`vendor_id`,
//! `product_id`, `dev_type`, `address`, or a pool tag such as
//! `physical_network`, compared case-insensitively), pools of physical
//! functions only when a spec asks for `dev_type` `type-PF`.
//!
//! Where we differ from Nova: a physical function taken makes its virtual
//! functions unavailable to the VM's later requests, and a virtual
//! function taken its physical function (Nova's scheduler-side check does
//! not follow dependents; its claim on the compute node does); the
//! rejection names the request and the devices found. Placement's
//! candidate mappings (`rp_uuids`) have no counterpart.

use sandpiper_guest::prelude::*;
use sandpiper_hardware::{Fitter, Options};

/// The `PciPassthroughFilter` filter.
pub struct PciPassthroughFilter;

impl Unit for PciPassthroughFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "PciPassthroughFilter",
            "Rejects hosts without free PCI devices matching the VM's PCI requests (Nova's \
             PciPassthroughFilter).",
        )
        .applies_to([RequestProperty::PciDevices])
        .per_host()
    }
}

impl Filter for PciPassthroughFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        if cx.vm().hardware.pci_requests.is_empty() {
            return Vec::new();
        }
        let mut fitter = Fitter::new(cx.inventory(), cx.vm(), Options::nova_pci_filter());
        for &host in candidates {
            if let Err(unfit) = fitter.check(host as usize) {
                let (template, figures) = unfit.template();
                rejections.reject_with(host, template, figures.as_slice());
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(PciPassthroughFilter: filter);
