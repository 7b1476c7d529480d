//! What one call's `Store` holds: the snapshot the `inventory` import reads,
//! a WASI with no authority and the memory limiter. Its own module because
//! both sides use it: the bindings (each version's `inventory` import reads
//! it) and the call that builds it (`wasm_unit`).

use std::sync::Arc;

use sandpiper_model::{HostMetric, Inventory, VmMetric};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::limits::MemoryLimiter;
use crate::unit::ColumnsRead;

/// What a call's `Store` holds.
pub(crate) struct CallState {
    pub(super) inventory: InventoryImport,
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limiter: MemoryLimiter,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl CallState {
    /// The `inventory` import's view of the state, for the linker.
    pub(crate) fn inventory(&mut self) -> &mut InventoryImport {
        &mut self.inventory
    }
}

/// The `inventory` import of one call, every version: reads the call's
/// snapshot.
///
/// A unit fetches each column at most once per call (the SDK caches
/// them). Numeric columns are lowered into the unit straight from the
/// shared snapshot (`bindings/columns.rs`); the others are converted to
/// their WIT shape first.
pub(crate) struct InventoryImport {
    pub(super) inventory: Arc<Inventory>,
    /// Every column the unit has fetched in this call.
    pub(super) read: ColumnsRead,
}

impl InventoryImport {
    pub(crate) fn new(inventory: Arc<Inventory>) -> Self {
        InventoryImport {
            inventory,
            read: ColumnsRead::NONE,
        }
    }

    /// A numeric host column, noted as read.
    pub(super) fn host_metric_column(&mut self, metric: HostMetric) -> Arc<Vec<f64>> {
        self.read.host_metric(metric);
        self.inventory.host_metric_shared(metric)
    }

    /// Each VM's host, noted as a read of the VMs.
    pub(super) fn vm_host_column(&mut self) -> Arc<Vec<u32>> {
        self.read.vms();
        self.inventory.vm_hosts_shared()
    }

    /// A numeric VM column, noted as a read of the VMs.
    pub(super) fn vm_metric_column(&mut self, metric: VmMetric) -> Arc<Vec<f64>> {
        self.read.vms();
        self.inventory.vm_metric_shared(metric)
    }
}
