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
            let reason = rejections.reason(if name.is_empty() {
                "the VM's host devices belong to another host".to_owned()
            } else {
                format!("the VM's host devices belong to host {name}")
            });
            for &host in candidates {
                if host != owner {
                    rejections.reject_for(host, reason);
                }
            }
        }
        let inventory = cx.inventory();
        let pools = inventory.pci_pools();
        let labels = inventory.pci_pool_labels();
        // Each request's specs as tests over the pools' string ids.
        let mut specs: Vec<Vec<Vec<Test>>> = requests
            .iter()
            .map(|request| {
                (request.specs.iter())
                    .map(|spec| Test::all_of(pools, labels, spec))
                    .collect()
            })
            .collect();
        // One sentence per request and number of devices found.
        let mut shortfalls: Sentences<(usize, u32)> = Sentences::new();
        // The host's pools' free counts, as the requests take them.
        let mut free: Vec<u32> = Vec::new();
        for &host in candidates {
            if vm
                .dedicated_hosts
                .first()
                .is_some_and(|&owner| owner != host)
            {
                continue;
            }
            let range = pools.host_pools(host as usize);
            free.clear();
            free.extend(
                range
                    .clone()
                    .map(|pool| pools.free.get(pool).copied().unwrap_or(0)),
            );
            for ((index, request), specs) in requests.iter().enumerate().zip(&mut specs) {
                let mut wanted = request.count;
                for (slot, pool) in range.clone().enumerate() {
                    if wanted == 0 {
                        break;
                    }
                    if specs.iter_mut().any(|tests| {
                        tests
                            .iter_mut()
                            .all(|test| test.passes(pools, labels, pool))
                    }) {
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

/// One property of a spec, resolved against the pools' string table, so a
/// pool is tested by looking its ids up rather than comparing strings.
enum Test<'r> {
    /// The wanted vendor, product or address (compared without case), and
    /// per string id of the pools' table whether it is that text, found
    /// on first use: a call asking about one host reads a few ids of a
    /// table that may name every device.
    Text {
        column: TextColumn,
        value: &'r str,
        per_id: Vec<Option<bool>>,
    },
    /// `dev_type`: the kind wanted, none for a value naming no kind.
    Kind(Option<DeviceKind>),
    /// Any other key: a tag the pool must have; per string id of the
    /// tags' table, whether it is the key and whether it is the value (an
    /// id past the table reads as "").
    Tag {
        keys: Vec<bool>,
        values: Vec<bool>,
        outside: (bool, bool),
    },
}

#[derive(Clone, Copy)]
enum TextColumn {
    Vendor,
    Product,
    Address,
}

impl<'r> Test<'r> {
    /// The tests of one spec, every one of which a pool must pass.
    fn all_of(pools: &PciPools, labels: &Labels, spec: &'r [KeyValue]) -> Vec<Test<'r>> {
        spec.iter()
            .map(|KeyValue { key, value }| {
                let value = value.trim();
                let text = |column| Test::Text {
                    column,
                    value,
                    per_id: vec![None; pools.strings.len()],
                };
                match key.as_str() {
                    "vendor_id" => text(TextColumn::Vendor),
                    "product_id" => text(TextColumn::Product),
                    "address" => text(TextColumn::Address),
                    "dev_type" => Test::Kind(match value {
                        "type-PCI" => Some(DeviceKind::Pci),
                        "type-PF" => Some(DeviceKind::PhysicalFunction),
                        "type-VF" => Some(DeviceKind::VirtualFunction),
                        _ => None,
                    }),
                    _ => Test::Tag {
                        keys: labels.ids_where(|s| s == key),
                        values: labels.ids_where(|s| s == value),
                        outside: (key.is_empty(), value.is_empty()),
                    },
                }
            })
            .collect()
    }

    /// Whether pool `pool` passes.
    fn passes(&mut self, pools: &PciPools, labels: &Labels, pool: usize) -> bool {
        match self {
            Test::Text {
                column,
                value,
                per_id,
            } => {
                let ids = match column {
                    TextColumn::Vendor => &pools.vendors,
                    TextColumn::Product => &pools.products,
                    TextColumn::Address => &pools.addresses,
                };
                let id = ids.get(pool).copied().unwrap_or(u32::MAX);
                match per_id.get_mut(id as usize) {
                    Some(known) => {
                        *known.get_or_insert_with(|| pools.text(id).eq_ignore_ascii_case(value))
                    }
                    // Past the table: the text "".
                    None => value.is_empty(),
                }
            }
            Test::Kind(kind) => kind.is_some() && pools.kinds.get(pool).copied() == *kind,
            Test::Tag {
                keys,
                values,
                outside,
            } => labels.id_pairs(pool).any(|(key, value)| {
                keys.get(key as usize).copied().unwrap_or(outside.0)
                    && values.get(value as usize).copied().unwrap_or(outside.1)
            }),
        }
    }
}

sandpiper_guest::export_unit!(HostDevice: filter);
