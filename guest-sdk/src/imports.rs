//! The `inventory` import, as the [`Fetch`] an [`Inventory`] fetches its
//! columns with (WebAssembly only). The snapshot's type names [`Imports`],
//! so each column read calls its import function directly and a unit's
//! component imports only the functions it calls.
//!
//! Each checks the host sent one row per host (or VM). A short or long
//! column is a broken host, not bad data: answering from it would be wrong
//! for every later row, so the call traps with a message naming the column,
//! which the host reports as the unit's failure. So does a column of enum
//! codes holding a code outside the enum.

use crate::Inventory;
use crate::bindings::inventory as wit;
use crate::inventory::Fetch;
use crate::model::codes::flags_from_bytes;
use crate::model::hardware::{
    CellCpus, CellDistances, CellMetric, CellPages, DeviceKind, MdevOffers, NumaTopology, PciPools,
    PcpuFlag, PoolColumn,
};
use crate::model::{
    HostFlag, HostLabels, HostMetric, HostStatus, HostText, Interned, Labels, VmFlag, VmMetric,
    VmText,
};

/// Stops the call: the host broke the contract (see the module doc).
#[cold]
fn wrong_length(column: &str, expected: usize, actual: usize) -> ! {
    panic!("the host sent column `{column}` with {actual} rows, the snapshot has {expected}")
}

fn checked<T>(column: &str, rows: usize, values: Vec<T>) -> Vec<T> {
    if values.len() != rows {
        wrong_length(column, rows, values.len());
    }
    values
}

/// Stops the call: a column of codes holds one outside its enum.
#[cold]
fn unknown_code(column: &str, code: u32) -> ! {
    panic!("the host sent column `{column}` with code {code}, which names no case")
}

/// A column of enum codes sent as `list<u32>` (each the case's WIT
/// position) as the model's enum. Byte columns are checked in place
/// instead (`column_from_codes`).
fn decode<T>(column: &str, codes: Vec<u32>, case: impl Fn(u8) -> Option<T>) -> Vec<T> {
    codes
        .into_iter()
        .map(|code| {
            (u8::try_from(code).ok())
                .and_then(&case)
                .unwrap_or_else(|| unknown_code(column, code))
        })
        .collect()
}

/// This call's snapshot, its columns fetched from the import as the unit
/// reads them.
pub fn inventory() -> Inventory {
    Inventory::fetched(
        wit::host_count() as usize,
        wit::vm_count() as usize,
        Imports,
    )
}

/// The host's `inventory` import.
#[derive(Clone, Copy, Debug)]
pub struct Imports;

impl Fetch for Imports {
    fn host_metric(&self, metric: HostMetric, rows: usize) -> Vec<f64> {
        checked(metric.wit_name(), rows, wit::host_metrics(metric.into()))
    }

    fn host_statuses(&self, rows: usize) -> Vec<HostStatus> {
        let codes = checked("host-statuses", rows, wit::host_statuses());
        HostStatus::column_from_codes(codes)
            .unwrap_or_else(|code| unknown_code("host-statuses", code.into()))
    }

    fn host_flag(&self, flag: HostFlag, rows: usize) -> Vec<bool> {
        flags_from_bytes(checked(flag.wit_name(), rows, wit::host_flags(flag.into())))
    }

    fn host_text(&self, text: HostText, rows: usize) -> Interned {
        let column = wit::host_texts(text.into());
        if column.indices.len() != rows {
            wrong_length(text.wit_name(), rows, column.indices.len());
        }
        column.into()
    }

    /// A set-like kind is read as a set, keys without values.
    fn host_labels(&self, kind: HostLabels, rows: usize) -> Labels {
        let column = if kind.is_set() {
            Labels::from(wit::host_sets(kind.into()))
        } else {
            Labels::from(wit::host_labels(kind.into()))
        };
        if column.rows() != rows {
            wrong_length(kind.wit_name(), rows, column.rows());
        }
        column
    }

    fn host_named_metric(&self, name: &str, rows: usize) -> Vec<f64> {
        checked(name, rows, wit::host_named_metric(name))
    }

    fn vm_hosts(&self, rows: usize) -> Vec<u32> {
        checked("vm-hosts", rows, wit::vm_hosts())
    }

    fn vm_metric(&self, metric: VmMetric, rows: usize) -> Vec<f64> {
        checked(metric.wit_name(), rows, wit::vm_metrics(metric.into()))
    }

    fn vm_flag(&self, flag: VmFlag, rows: usize) -> Vec<bool> {
        flags_from_bytes(checked(flag.wit_name(), rows, wit::vm_flags(flag.into())))
    }

    fn vm_text(&self, text: VmText, rows: usize) -> Interned {
        let column = wit::vm_texts(text.into());
        if column.indices.len() != rows {
            wrong_length(text.wit_name(), rows, column.indices.len());
        }
        column.into()
    }

    fn numa_topology(&self, hosts: usize) -> NumaTopology {
        let column = NumaTopology::from(wit::numa_cells());
        rows_of("numa-cells", hosts, column.hosts());
        column
    }

    fn cell_metric(&self, metric: CellMetric, cells: usize) -> Vec<f64> {
        checked(
            metric.wit_name(),
            cells,
            wit::numa_cell_metrics(metric.into()),
        )
    }

    fn cell_cpus(&self, cells: usize) -> CellCpus {
        let column = CellCpus::from(wit::numa_cell_cpus());
        rows_of("numa-cell-cpus", cells, column.cells());
        column
    }

    fn pcpu_flag(&self, flag: PcpuFlag, entries: usize) -> Vec<bool> {
        flags_from_bytes(checked(
            flag.wit_name(),
            entries,
            wit::numa_pcpu_flags(flag.into()),
        ))
    }

    fn cell_pages(&self, cells: usize) -> CellPages {
        let column = CellPages::from(wit::numa_cell_pages());
        rows_of("numa-cell-pages", cells, column.cells());
        column
    }

    fn cell_distances(&self, cells: usize) -> CellDistances {
        let column = CellDistances::from(wit::numa_cell_distances());
        rows_of("numa-cell-distances", cells, column.cells());
        column
    }

    /// Every column, each fetched on its own.
    fn pci_pools(&self, hosts: usize) -> PciPools {
        let offsets = self.pci_pool_offsets(hosts);
        let pools = offsets.last().copied().unwrap_or(0) as usize;
        let column = |column| self.pci_pool_column(column, hosts, pools);
        let kinds = checked(
            "kinds",
            pools,
            wit::device_pool_column(wit::PoolColumn::Kinds),
        );
        PciPools {
            strings: crate::convert::strings(wit::device_pool_strings()),
            vendors: column(PoolColumn::Vendors),
            products: column(PoolColumn::Products),
            addresses: column(PoolColumn::Addresses),
            kinds: decode("kinds", kinds, DeviceKind::from_code),
            cells: column(PoolColumn::Cells),
            parents: column(PoolColumn::Parents),
            total: column(PoolColumn::Total),
            free: column(PoolColumn::Free),
            offsets,
        }
    }

    fn pci_pool_offsets(&self, hosts: usize) -> Vec<u32> {
        let offsets = wit::device_pool_offsets();
        rows_of(
            "device-pool-offsets",
            hosts,
            offsets.len().saturating_sub(1),
        );
        offsets
    }

    fn pci_pool_column(&self, column: PoolColumn, _hosts: usize, pools: usize) -> Vec<u32> {
        checked(
            column.wit_name(),
            pools,
            wit::device_pool_column(column.into()),
        )
    }

    fn pci_pool_labels(&self, pools: usize) -> Labels {
        let column = Labels::from(wit::device_pool_labels());
        rows_of("device-pool-labels", pools, column.rows());
        column
    }

    fn mdev_offers(&self, hosts: usize) -> MdevOffers {
        let column = MdevOffers::from(wit::mdev_types());
        rows_of("mdev-types", hosts, column.hosts());
        column
    }
}

/// Stops the call when a compressed-row column describes the wrong number
/// of rows.
fn rows_of(column: &str, expected: usize, actual: usize) {
    if expected != actual {
        wrong_length(column, expected, actual);
    }
}
