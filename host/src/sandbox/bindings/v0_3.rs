//! `sandpiper:policy@0.3.0`, the current version (`wit/policy.wit`):
//! everything the model holds crosses in both directions, enum columns as
//! byte codes, device pools a column at a time, set-like columns without
//! values, and `applies-to` by parameter.

wasmtime::component::bindgen!({
    path: "../wit",
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
super::since_v0_2::conversions_since_0_2!(W::Param(name) => M::Param(name),);
super::guest_calls!(V0_3);

/// `host-statuses` as codes (see the package doc of `wit/policy.wit`).
type StatusColumn = Vec<u8>;
use super::status_codes as statuses;

impl inventory::Host for InventoryImport {
    super::shared_inventory!();
    super::since_v0_2::inventory_since_0_2!();

    fn host_sets(&mut self, kind: types::HostLabelKind) -> types::Sets {
        let column = self.inventory.host_labels(kind.into());
        types::Sets {
            strings: strings(&column.strings),
            offsets: column.offsets.clone(),
            members: column.keys.clone(),
        }
    }

    fn device_pool_offsets(&mut self) -> Vec<u32> {
        self.read.hardware();
        self.inventory.pci_pools().offsets.clone()
    }

    fn device_pool_strings(&mut self) -> types::Strings {
        self.read.hardware();
        strings(&self.inventory.pci_pools().strings)
    }

    fn device_pool_column(&mut self, column: types::PoolColumn) -> Vec<u32> {
        self.read.hardware();
        use model::PoolColumn as M;
        use types::PoolColumn as W;
        let pools = self.inventory.pci_pools();
        let column = match column {
            W::Kinds => return pools.kinds.iter().map(|&k| u32::from(k.code())).collect(),
            W::Vendors => M::Vendors,
            W::Products => M::Products,
            W::Addresses => M::Addresses,
            W::Cells => M::Cells,
            W::Parents => M::Parents,
            W::Total => M::Total,
            W::Free => M::Free,
        };
        pools.column(column).to_vec()
    }
}
