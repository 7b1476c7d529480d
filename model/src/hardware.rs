//! Hardware data, new in `sandpiper:policy@0.2.0`: the hosts' NUMA cells,
//! physical CPUs, memory pages, PCI device pools and mediated device types
//! (read through [`crate::Inventory`]), and what a VM needs of them
//! ([`VmHardware`], a field of [`crate::Vm`]).
//!
//! The host side is flat, in compressed rows, as the WIT sends it: one
//! vector per field over every row of the cluster plus an `offsets` vector
//! saying which rows belong to which host (or cell). A fitter over 10,000
//! hosts walks a few vectors instead of 10,000 nested records, and the
//! inventory sends each to a unit in one copy. Every type here is empty by
//! default: a host with no NUMA data has no cells, which is true data ("no
//! NUMA reported"), not an error.

use std::ops::Range;

use crate::KeyValue;

/// The `u32` standing for "none" where a reference may be absent (a pool's
/// NUMA cell, a virtual function's parent): an `option<u32>` would cross
/// the component boundary value by value.
pub const NONE: u32 = u32::MAX;

/// Row `row`'s range in a compressed-row `offsets` vector; empty when the
/// row is out of range or the offsets are malformed, so a reader never
/// panics on a broken column.
pub fn row_range(offsets: &[u32], row: usize) -> Range<usize> {
    let start = offsets.get(row).copied().unwrap_or(0) as usize;
    let end = offsets.get(row + 1).copied().unwrap_or(0) as usize;
    if start <= end { start..end } else { 0..0 }
}

/// Offsets of `rows` empty rows: what a column reads as when nobody set it.
pub fn empty_offsets(rows: usize) -> Vec<u32> {
    vec![0; rows + 1]
}

wit_enum! {
    /// Numeric per-cell columns. See `types.cell-metric` in the WIT.
    CellMetric {
        MemoryTotalMib = "memory-total-mib",
        MemoryFreeMib = "memory-free-mib",
        Cpus = "cpus",
        DedicatedCpus = "dedicated-cpus",
        PinnedCpus = "pinned-cpus",
        SharedVcpusUsed = "shared-vcpus-used",
    }
}

wit_enum! {
    /// Yes/no columns over a cell's physical CPUs. See `types.pcpu-flag`.
    PcpuFlag {
        Dedicated = "dedicated",
        Pinned = "pinned",
    }
}

wit_enum! {
    /// What a PCI device pool holds. See `types.device-kind`.
    DeviceKind {
        Pci = "pci",
        PhysicalFunction = "physical-function",
        VirtualFunction = "virtual-function",
    }
}

wit_enum! {
    /// How vCPUs use host CPUs. See `types.cpu-policy`.
    CpuPolicy {
        Shared = "shared",
        Dedicated = "dedicated",
        Mixed = "mixed",
    }
}

wit_enum! {
    /// How pinned vCPUs treat hardware threads. See `types.thread-policy`.
    ThreadPolicy {
        Prefer = "prefer",
        Isolate = "isolate",
        Require = "require",
    }
}

wit_enum! {
    /// Where emulator threads run. See `types.emulator-threads`.
    EmulatorThreads {
        Share = "share",
        Isolate = "isolate",
    }
}

wit_enum! {
    /// How strictly guest cells bind to host cells. See `types.numa-tune`.
    NumaTune {
        Strict = "strict",
        Interleave = "interleave",
        Preferred = "preferred",
    }
}

wit_enum! {
    /// How a PCI request relates to NUMA cells. See `types.pci-numa-policy`.
    PciNumaPolicy {
        Legacy = "legacy",
        Required = "required",
        Preferred = "preferred",
        Socket = "socket",
    }
}

/// `Default` for the enums above: the WIT's first case, which is also each
/// one's "no requirement".
macro_rules! first_case_default {
    ($($name:ident => $case:ident),* $(,)?) => {$(
        impl Default for $name {
            fn default() -> Self {
                $name::$case
            }
        }
    )*};
}

first_case_default!(
    DeviceKind => Pci,
    CpuPolicy => Shared,
    ThreadPolicy => Prefer,
    EmulatorThreads => Share,
    NumaTune => Strict,
    PciNumaPolicy => Legacy,
);

/// The memory page size a VM needs. See `types.page-size`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum PageSize {
    #[default]
    Unspecified,
    Small,
    Large,
    Any,
    Kib(u32),
}

/// The cluster's NUMA cells. See `types.numa-topology`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct NumaTopology {
    pub offsets: Vec<u32>,
    pub node_ids: Vec<u32>,
    pub sockets: Vec<u32>,
}

impl NumaTopology {
    /// `hosts` hosts with no cells.
    pub fn empty(hosts: usize) -> Self {
        NumaTopology {
            offsets: empty_offsets(hosts),
            ..NumaTopology::default()
        }
    }

    /// Number of hosts the topology describes.
    pub fn hosts(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Number of cells in the cluster.
    pub fn cells(&self) -> usize {
        self.node_ids.len()
    }

    /// The cells (cluster-wide indices) of host `host`.
    pub fn host_cells(&self, host: usize) -> Range<usize> {
        row_range(&self.offsets, host)
    }
}

/// The physical CPUs of every cell. See `types.cell-cpus`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct CellCpus {
    pub offsets: Vec<u32>,
    pub cpus: Vec<u32>,
    pub cores: Vec<u32>,
}

impl CellCpus {
    /// `cells` cells with no CPUs listed.
    pub fn empty(cells: usize) -> Self {
        CellCpus {
            offsets: empty_offsets(cells),
            ..CellCpus::default()
        }
    }

    /// Number of cells described.
    pub fn cells(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The entries of cell `cell`.
    pub fn cell(&self, cell: usize) -> Range<usize> {
        row_range(&self.offsets, cell)
    }
}

/// Memory pages per cell and page size. See `types.cell-pages`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct CellPages {
    pub offsets: Vec<u32>,
    pub size_kib: Vec<u32>,
    pub total: Vec<f64>,
    pub free: Vec<f64>,
}

impl CellPages {
    /// `cells` cells with no pages reported.
    pub fn empty(cells: usize) -> Self {
        CellPages {
            offsets: empty_offsets(cells),
            ..CellPages::default()
        }
    }

    /// Number of cells described.
    pub fn cells(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The entries of cell `cell`.
    pub fn cell(&self, cell: usize) -> Range<usize> {
        row_range(&self.offsets, cell)
    }
}

/// Distances between a host's cells. See `types.cell-distances`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct CellDistances {
    pub offsets: Vec<u32>,
    pub values: Vec<u32>,
}

impl CellDistances {
    /// `cells` cells with no distances reported.
    pub fn empty(cells: usize) -> Self {
        CellDistances {
            offsets: empty_offsets(cells),
            ..CellDistances::default()
        }
    }

    /// Number of cells described.
    pub fn cells(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Cell `cell`'s distances to the cells of its host, in cell order.
    pub fn row(&self, cell: usize) -> &[u32] {
        self.values
            .get(row_range(&self.offsets, cell))
            .unwrap_or(&[])
    }
}

/// The hosts' assignable PCI devices, as pools. See `types.pci-pools`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct PciPools {
    pub offsets: Vec<u32>,
    pub strings: Vec<String>,
    pub vendors: Vec<u32>,
    pub products: Vec<u32>,
    pub addresses: Vec<u32>,
    pub kinds: Vec<DeviceKind>,
    pub cells: Vec<u32>,
    pub parents: Vec<u32>,
    pub total: Vec<u32>,
    pub free: Vec<u32>,
}

impl PciPools {
    /// `hosts` hosts with no devices.
    pub fn empty(hosts: usize) -> Self {
        PciPools {
            offsets: empty_offsets(hosts),
            ..PciPools::default()
        }
    }

    /// Number of hosts described.
    pub fn hosts(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Number of pools in the cluster.
    pub fn pools(&self) -> usize {
        self.kinds.len()
    }

    /// The pools (cluster-wide indices) of host `host`.
    pub fn host_pools(&self, host: usize) -> Range<usize> {
        row_range(&self.offsets, host)
    }

    /// The string at `index`, "" when out of range.
    pub fn text(&self, index: u32) -> &str {
        self.strings.get(index as usize).map_or("", String::as_str)
    }

    /// One of the per-pool `u32` columns.
    pub fn column(&self, column: PoolColumn) -> &[u32] {
        match column {
            PoolColumn::Vendors => &self.vendors,
            PoolColumn::Products => &self.products,
            PoolColumn::Addresses => &self.addresses,
            PoolColumn::Cells => &self.cells,
            PoolColumn::Parents => &self.parents,
            PoolColumn::Total => &self.total,
            PoolColumn::Free => &self.free,
        }
    }
}

/// The per-pool `u32` columns of [`PciPools`], which a unit may read one at
/// a time ([`crate::Inventory::pci_pool_column`]; in WIT 0.3.0
/// `inventory.device-pool-column`): a weigher summing free devices reads
/// `free` alone instead of all nine columns. `kinds` is not one of them:
/// it is a column of [`DeviceKind`]s, read with the whole pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolColumn {
    Vendors,
    Products,
    Addresses,
    Cells,
    Parents,
    Total,
    Free,
}

impl PoolColumn {
    /// Every column.
    pub const ALL: [PoolColumn; 7] = [
        PoolColumn::Vendors,
        PoolColumn::Products,
        PoolColumn::Addresses,
        PoolColumn::Cells,
        PoolColumn::Parents,
        PoolColumn::Total,
        PoolColumn::Free,
    ];
    /// Number of columns.
    pub const COUNT: usize = Self::ALL.len();

    /// The column's name in the WIT (`pool-column`).
    pub fn wit_name(self) -> &'static str {
        match self {
            PoolColumn::Vendors => "vendors",
            PoolColumn::Products => "products",
            PoolColumn::Addresses => "addresses",
            PoolColumn::Cells => "cells",
            PoolColumn::Parents => "parents",
            PoolColumn::Total => "total",
            PoolColumn::Free => "free",
        }
    }
}

/// Mediated device types with free instances. See `types.mdev-offers`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct MdevOffers {
    pub offsets: Vec<u32>,
    pub strings: Vec<String>,
    pub names: Vec<u32>,
    pub free: Vec<u32>,
    pub pools: Vec<u32>,
}

impl MdevOffers {
    /// `hosts` hosts offering no mediated devices.
    pub fn empty(hosts: usize) -> Self {
        MdevOffers {
            offsets: empty_offsets(hosts),
            ..MdevOffers::default()
        }
    }

    /// Number of hosts described.
    pub fn hosts(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The entries of host `host`.
    pub fn host_offers(&self, host: usize) -> Range<usize> {
        row_range(&self.offsets, host)
    }

    /// The string at `index`, "" when out of range.
    pub fn text(&self, index: u32) -> &str {
        self.strings.get(index as usize).map_or("", String::as_str)
    }
}

/// One guest NUMA cell. See `types.vm-numa-cell`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct VmNumaCell {
    pub shared_vcpus: Vec<u32>,
    pub dedicated_vcpus: Vec<u32>,
    pub memory_mib: f64,
    pub host_nodes: Vec<u32>,
}

/// Devices a VM needs. See `types.pci-request`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct PciRequest {
    pub alias: String,
    pub count: u32,
    pub specs: Vec<Vec<KeyValue>>,
    pub numa_policy: PciNumaPolicy,
}

/// What a VM needs of a host's hardware; every field's default means no
/// requirement. See `types.vm-hardware`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct VmHardware {
    pub numa_cells: Vec<VmNumaCell>,
    pub numa_tune: NumaTune,
    pub cpu_policy: CpuPolicy,
    pub thread_policy: ThreadPolicy,
    pub emulator_threads: EmulatorThreads,
    pub page_size: PageSize,
    pub cpu_model: String,
    pub required_cpu_flags: Vec<String>,
    pub forbidden_cpu_flags: Vec<String>,
    pub pci_requests: Vec<PciRequest>,
    pub mdev_types: Vec<String>,
    pub compatibility_version: String,
    pub machine_type: String,
    pub keeps_tsc_frequency: bool,
}
