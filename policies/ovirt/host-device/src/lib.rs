//! `HostDevice`: rejects hosts that cannot give the VM its passthrough
//! host devices.
//!
//! Behaviour from oVirt's `HostDeviceFilterPolicyUnit` (reference notes
//! §2.1), one of oVirt's mandatory filters: a VM without host devices
//! passes every host. In oVirt a VM's host devices are devices *of one
//! host*, the single entry of its `dedicatedVmForVdsList`, so every other
//! host is rejected; that host must have the devices free
//! (`checkVmHostDeviceAvailability`).
//!
//! Encodings: the VM's host devices are its `pci_requests`; a request's
//! specs are matched against the host's device pools by `vendor_id`,
//! `product_id`, `address`, `dev_type` (`type-PCI`, `type-PF`, `type-VF`)
//! and, for any other key, the pool's tags; ids compare without case. The
//! host they belong to is the VM's first dedicated host, when it has any;
//! without dedicated hosts any host with the devices free will do.
//!
//! Differs: oVirt also rejects a host with PCI passthrough (IOMMU)
//! disabled; the contract has no such column, so a host that lists
//! assignable devices is taken to allow passthrough. Requests take devices
//! from the pools in order (each pool's free count shared between them);
//! physical and virtual functions of one device are not weighed against
//! each other (the claim does that).
//!
//! Not `sandpiper-hardware`'s PCI fitting: Nova's matching never hands out
//! a physical function unless the spec asks for `dev_type` `type-PF`, while
//! an oVirt host device may be any device of the host, a whole PF included.
//!
//! Data: `device-pools`, `device-pool-labels`, `name`; VM hardware
//! `pci_requests`, `dedicated-hosts`.

use sandpiper_guest::model::hardware::{DeviceKind, PciPools};
use sandpiper_guest::model::{KeyValue, Labels};
use sandpiper_guest::prelude::*;

/// The `HostDevice` filter.
pub struct HostDevice;

impl Unit for HostDevice {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "HostDevice",
            "Rejects hosts other than the one the VM's host devices belong to, and hosts \
             without the VM's passthrough devices free.",
        )
        .applies_to([RequestProperty::PciDevices])
    }
}

impl Filter for HostDevice {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        let requests = &vm.hardware.pci_requests;
        if requests.is_empty() {
            return rejections.into_vec();
        }
        let hosts = cx.hosts();
        if let Some(&owner) = vm.dedicated_hosts.first() {
            let name = hosts.get(owner).map_or("", |host| host.name());
            let reason = if name.is_empty() {
                "the VM's host devices belong to another host".to_owned()
            } else {
                format!("the VM's host devices belong to host {name}")
            };
            for &host in candidates {
                if host != owner {
                    rejections.reject(host, &reason);
                }
            }
        }
        let inventory = cx.inventory();
        let pools = inventory.pci_pools();
        let labels = inventory.pci_pool_labels();
        // One sentence per request and number of devices found.
        let mut shortfalls: Sentences<(usize, u32)> = Sentences::new();
        for &host in candidates {
            if vm
                .dedicated_hosts
                .first()
                .is_some_and(|&owner| owner != host)
            {
                continue;
            }
            let range = pools.host_pools(host as usize);
            let mut free: Vec<u32> = range
                .clone()
                .map(|pool| pools.free.get(pool).copied().unwrap_or(0))
                .collect();
            for (index, request) in requests.iter().enumerate() {
                let mut wanted = request.count;
                for (slot, pool) in range.clone().enumerate() {
                    if wanted == 0 {
                        break;
                    }
                    if request
                        .specs
                        .iter()
                        .any(|spec| matches(pools, labels, pool, spec))
                    {
                        let take = free[slot].min(wanted);
                        free[slot] -= take;
                        wanted -= take;
                    }
                }
                if wanted > 0 {
                    let found = request.count - wanted;
                    let reason = shortfalls.get(&(index, found), || {
                        let what = if request.alias.is_empty() {
                            format!("request {}", index + 1)
                        } else {
                            format!("alias {}", request.alias)
                        };
                        format!(
                            "has {found} of the {} free host device(s) the VM's {what} needs",
                            request.count
                        )
                    });
                    rejections.reject(host, reason);
                    break;
                }
            }
        }
        rejections.into_vec()
    }
}

/// Whether pool `pool` has every property of `spec`.
fn matches(pools: &PciPools, labels: &Labels, pool: usize, spec: &[KeyValue]) -> bool {
    spec.iter().all(|KeyValue { key, value }| {
        let value = value.trim();
        let text = |column: &[u32]| pools.text(column.get(pool).copied().unwrap_or(u32::MAX));
        match key.as_str() {
            "vendor_id" => text(&pools.vendors).eq_ignore_ascii_case(value),
            "product_id" => text(&pools.products).eq_ignore_ascii_case(value),
            "address" => text(&pools.addresses).eq_ignore_ascii_case(value),
            "dev_type" => {
                let kind = pools.kinds.get(pool).copied();
                match value {
                    "type-PCI" => kind == Some(DeviceKind::Pci),
                    "type-PF" => kind == Some(DeviceKind::PhysicalFunction),
                    "type-VF" => kind == Some(DeviceKind::VirtualFunction),
                    _ => false,
                }
            }
            _ => labels.row(pool).any(|(k, v)| k == key && v == value),
        }
    })
}

sandpiper_guest::export_unit!(HostDevice: filter);
