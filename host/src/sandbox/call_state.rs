//! What one call's `Store` holds: the snapshot the `inventory` import reads,
//! a WASI with no authority and the memory limiter. Its own module because
//! both sides use it: the bindings (each version's `inventory` import reads
//! it) and the call that builds it (`wasm_unit`).

use std::sync::Arc;

use sandpiper_model::{HostMetric, Inventory, VmMetric};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::limits::MemoryLimiter;
use super::wasi::{self, StderrCapture};
use crate::unit::ColumnsRead;

/// What a call's `Store` holds.
pub(crate) struct CallState {
    pub(super) inventory: InventoryImport,
    /// The call's WASI, built on the unit's first WASI call: most calls
    /// make none, and building one (wasmtime-wasi seeds random generators
    /// that `wasi::context` then replaces) and dropping it was a few per
    /// cent of every call's fixed cost.
    wasi: Option<WasiCtx>,
    /// Where the unit's stderr goes, kept here so that the WASI built
    /// late writes into the buffer the call reads after a failure.
    pub(super) stderr: StderrCapture,
    pub(super) table: ResourceTable,
    pub(super) limiter: MemoryLimiter,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let stderr = &self.stderr;
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(|| wasi::context(stderr)),
            table: &mut self.table,
        }
    }
}

impl CallState {
    /// A call's state over `inventory`, its memory limited to
    /// `memory_bytes`; no WASI yet.
    pub(super) fn new(inventory: InventoryImport, memory_bytes: u64) -> Self {
        CallState {
            inventory,
            wasi: None,
            stderr: StderrCapture::default(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(memory_bytes),
        }
    }

    /// The `inventory` import's view of the state, for the linker.
    pub(crate) fn inventory(&mut self) -> &mut InventoryImport {
        &mut self.inventory
    }

    /// Whether the unit has called WASI in this call.
    #[cfg(test)]
    pub(super) fn wasi_built(&self) -> bool {
        self.wasi.is_some()
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

    /// An engine-defined metric by name. Not noted: a named metric is part
    /// of what a host reports, which every kept answer is stamped with.
    pub(super) fn host_named_metric_column(&mut self, name: &str) -> Arc<Vec<f64>> {
        self.inventory.host_named_metric(name)
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
