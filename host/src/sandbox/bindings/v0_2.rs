//! `sandpiper:policy@0.2.0`, frozen (`wit/0.2.0/policy.wit`): served so
//! that units built against it keep working unchanged. What it shares
//! with 0.3.0 is in `since_v0_2`; what is its own here: the statuses and a
//! device pool's kind as enum lists, set-like columns only as `labels`,
//! and the device pools in one record.

wasmtime::component::bindgen!({
    path: "../wit/0.2.0",
    // The world exporting every role: its types and import are what any
    // unit sees; which exports a given unit has is read from the unit.
    world: "sandpiper:policy/full-unit",
});

use self::sandpiper::policy::inventory;
pub(crate) use self::sandpiper::policy::types;
use sandpiper_model as model;

use super::{lower_vm, same_enum};
use crate::sandbox::call_state::InventoryImport;

super::shared_conversions!();
super::since_v0_2::conversions_since_0_2!();
super::guest_calls!(V0_2);

same_enum!(model::DeviceKind => types::DeviceKind { Pci, PhysicalFunction, VirtualFunction });

/// `host-statuses` as an enum list (codes since 0.3.0).
type StatusColumn = Vec<types::HostStatus>;
use super::status_cases as statuses;

impl inventory::Host for InventoryImport {
    super::shared_inventory!();
    super::since_v0_2::inventory_since_0_2!();

    fn device_pools(&mut self) -> types::PciPools {
        self.read.hardware();
        let pools = self.inventory.pci_pools();
        types::PciPools {
            offsets: pools.offsets.clone(),
            strings: strings(&pools.strings),
            vendors: pools.vendors.clone(),
            products: pools.products.clone(),
            addresses: pools.addresses.clone(),
            kinds: pools.kinds.iter().map(|&k| k.into()).collect(),
            cells: pools.cells.clone(),
            parents: pools.parents.clone(),
            total: pools.total.clone(),
            free: pools.free.clone(),
        }
    }
}
