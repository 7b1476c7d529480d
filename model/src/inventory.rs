//! The cluster snapshot a unit reads, column by column.
//!
//! Inside a component every column starts empty and is fetched from the
//! host's `inventory` import the first time the unit reads it, so a unit pays
//! only for the columns it uses: the guest SDK's snapshot is an
//! `Inventory<Imports>`, whose [`Fetch`] calls the import. Natively (the
//! host, benchmarks, tests) the host fills the columns it has; a column
//! nobody filled reads as its default (zeros, `up`, `false`, empty strings,
//! no labels, no NUMA cells, no devices), with the right length
//! ([`Defaults`]).
//!
//! Hardware columns (new in WIT 0.2.0, [`crate::hardware`]) have more than
//! one row per host: cell-level columns have one row per NUMA cell of the
//! cluster, so their length is read from [`Inventory::numa_topology`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::hardware::{
    CellCpus, CellDistances, CellMetric, CellPages, MdevOffers, NumaTopology, PciPools, PcpuFlag,
    PoolColumn,
};
use crate::{
    HostFlag, HostLabels, HostMetric, HostStatus, HostText, Interned, Labels, VmFlag, VmMetric,
    VmText,
};

/// Columns of `N` lazily-set values, one per enum case. Each column sits
/// behind an `Arc` so that [`Inventory::share`] can hand it to another
/// snapshot without copying it.
type Slots<T, const N: usize> = [OnceLock<Arc<T>>; N];

/// Fetches whole columns for a snapshot that does not hold them: natively
/// the defaults ([`Defaults`]); inside a component, the host's `inventory`
/// import (the guest SDK implements it). Each function is called at most
/// once per column and snapshot, and returns one row per host (or VM) of a
/// snapshot of `rows` rows.
///
/// A trait rather than calls to the import here, so that this crate stays
/// free of the guest bindings and compiles the same for the host. The
/// snapshot takes it as a type parameter, not as a `dyn Fetch`: with static
/// dispatch a component links only the import functions its unit calls,
/// and the compiler inlines a column read's fast path (the column is
/// already there) into the unit's per-host loop. Through a `dyn Fetch`
/// every unit imported every column function (a vtable names them all) and
/// each per-host read became an out-of-line call (issue #10's regression of
/// the `Memory` filter, docs/performance.md).
pub trait Fetch: Sync {
    /// Whether an engine-defined metric fetched once is kept for the next
    /// read. Natively an unknown name is not remembered, so the cache holds
    /// only what the host set ([`Inventory::host_named_metric_names`]), and
    /// every unknown name reads one shared column of NaN.
    const REMEMBERS_NAMED_METRICS: bool = true;

    fn host_metric(&self, metric: HostMetric, rows: usize) -> Vec<f64>;
    fn host_statuses(&self, rows: usize) -> Vec<HostStatus>;
    fn host_flag(&self, flag: HostFlag, rows: usize) -> Vec<bool>;
    fn host_text(&self, text: HostText, rows: usize) -> Interned;
    fn host_labels(&self, kind: HostLabels, rows: usize) -> Labels;
    fn host_named_metric(&self, name: &str, rows: usize) -> Vec<f64>;
    fn vm_hosts(&self, rows: usize) -> Vec<u32>;
    fn vm_metric(&self, metric: VmMetric, rows: usize) -> Vec<f64>;
    fn vm_flag(&self, flag: VmFlag, rows: usize) -> Vec<bool>;
    fn vm_text(&self, text: VmText, rows: usize) -> Interned;

    // Hardware (WIT 0.2.0). `hosts`, `cells`, `entries` and `pools` are the
    // rows the snapshot expects.
    fn numa_topology(&self, hosts: usize) -> NumaTopology;
    fn cell_metric(&self, metric: CellMetric, cells: usize) -> Vec<f64>;
    fn cell_cpus(&self, cells: usize) -> CellCpus;
    fn pcpu_flag(&self, flag: PcpuFlag, entries: usize) -> Vec<bool>;
    fn cell_pages(&self, cells: usize) -> CellPages;
    fn cell_distances(&self, cells: usize) -> CellDistances;
    fn pci_pools(&self, hosts: usize) -> PciPools;
    fn pci_pool_labels(&self, pools: usize) -> Labels;
    fn mdev_offers(&self, hosts: usize) -> MdevOffers;

    /// Which pools each host owns, without the pools' columns; by default
    /// read from the whole pools.
    fn pci_pool_offsets(&self, hosts: usize) -> Vec<u32> {
        self.pci_pools(hosts).offsets
    }

    /// One per-pool column, of `pools` rows; by default read from the
    /// whole pools.
    fn pci_pool_column(&self, column: PoolColumn, hosts: usize, _pools: usize) -> Vec<u32> {
        self.pci_pools(hosts).column(column).to_vec()
    }
}

/// Natively: a column nobody set reads as its default (zeros, `up`,
/// `false`, empty strings, no labels; a named metric as NaN).
#[derive(Clone, Copy, Debug, Default)]
pub struct Defaults;

impl Fetch for Defaults {
    const REMEMBERS_NAMED_METRICS: bool = false;

    fn host_metric(&self, _: HostMetric, rows: usize) -> Vec<f64> {
        vec![0.0; rows]
    }
    fn host_statuses(&self, rows: usize) -> Vec<HostStatus> {
        vec![HostStatus::Up; rows]
    }
    fn host_flag(&self, _: HostFlag, rows: usize) -> Vec<bool> {
        vec![false; rows]
    }
    fn host_text(&self, _: HostText, rows: usize) -> Interned {
        default_interned(rows)
    }
    fn host_labels(&self, _: HostLabels, rows: usize) -> Labels {
        default_labels(rows)
    }
    fn host_named_metric(&self, _: &str, rows: usize) -> Vec<f64> {
        vec![f64::NAN; rows]
    }
    fn vm_hosts(&self, rows: usize) -> Vec<u32> {
        vec![0; rows]
    }
    fn vm_metric(&self, _: VmMetric, rows: usize) -> Vec<f64> {
        vec![0.0; rows]
    }
    fn vm_flag(&self, _: VmFlag, rows: usize) -> Vec<bool> {
        vec![false; rows]
    }
    fn vm_text(&self, _: VmText, rows: usize) -> Interned {
        default_interned(rows)
    }
    fn numa_topology(&self, hosts: usize) -> NumaTopology {
        NumaTopology::empty(hosts)
    }
    fn cell_metric(&self, _: CellMetric, cells: usize) -> Vec<f64> {
        vec![0.0; cells]
    }
    fn cell_cpus(&self, cells: usize) -> CellCpus {
        CellCpus::empty(cells)
    }
    fn pcpu_flag(&self, _: PcpuFlag, entries: usize) -> Vec<bool> {
        vec![false; entries]
    }
    fn cell_pages(&self, cells: usize) -> CellPages {
        CellPages::empty(cells)
    }
    fn cell_distances(&self, cells: usize) -> CellDistances {
        CellDistances::empty(cells)
    }
    fn pci_pools(&self, hosts: usize) -> PciPools {
        PciPools::empty(hosts)
    }
    fn pci_pool_labels(&self, pools: usize) -> Labels {
        default_labels(pools)
    }
    fn mdev_offers(&self, hosts: usize) -> MdevOffers {
        MdevOffers::empty(hosts)
    }
}

/// The hardware columns of a snapshot, each set once or fetched when first
/// read. Kept apart so that [`Inventory::share_hosts`] can hand all of
/// them to another snapshot at once.
struct HardwareSlots {
    numa: OnceLock<Arc<NumaTopology>>,
    cell_metrics: Slots<Vec<f64>, { CellMetric::COUNT }>,
    cell_cpus: OnceLock<Arc<CellCpus>>,
    pcpu_flags: Slots<Vec<bool>, { PcpuFlag::COUNT }>,
    cell_pages: OnceLock<Arc<CellPages>>,
    cell_distances: OnceLock<Arc<CellDistances>>,
    pci_pools: OnceLock<Arc<PciPools>>,
    /// The pools' offsets and columns read one at a time, while the
    /// whole pools are not (see [`Inventory::pci_pool_column`]).
    pci_pool_offsets: OnceLock<Arc<Vec<u32>>>,
    pci_pool_columns: Slots<Vec<u32>, { PoolColumn::COUNT }>,
    pci_pool_labels: OnceLock<Arc<Labels>>,
    mdev_offers: OnceLock<Arc<MdevOffers>>,
}

impl HardwareSlots {
    fn new() -> Self {
        HardwareSlots {
            numa: OnceLock::new(),
            cell_metrics: std::array::from_fn(|_| OnceLock::new()),
            cell_cpus: OnceLock::new(),
            pcpu_flags: std::array::from_fn(|_| OnceLock::new()),
            cell_pages: OnceLock::new(),
            cell_distances: OnceLock::new(),
            pci_pools: OnceLock::new(),
            pci_pool_offsets: OnceLock::new(),
            pci_pool_columns: std::array::from_fn(|_| OnceLock::new()),
            pci_pool_labels: OnceLock::new(),
            mdev_offers: OnceLock::new(),
        }
    }

    /// The same columns, shared, not copied.
    fn share(&self) -> Self {
        HardwareSlots {
            numa: share_one(&self.numa),
            cell_metrics: share_slots(&self.cell_metrics),
            cell_cpus: share_one(&self.cell_cpus),
            pcpu_flags: share_slots(&self.pcpu_flags),
            cell_pages: share_one(&self.cell_pages),
            cell_distances: share_one(&self.cell_distances),
            pci_pools: share_one(&self.pci_pools),
            pci_pool_offsets: share_one(&self.pci_pool_offsets),
            pci_pool_columns: share_slots(&self.pci_pool_columns),
            pci_pool_labels: share_one(&self.pci_pool_labels),
            mdev_offers: share_one(&self.mdev_offers),
        }
    }
}

fn share_slots<T, const N: usize>(from: &Slots<T, N>) -> Slots<T, N> {
    std::array::from_fn(|i| share_one(&from[i]))
}

fn share_one<T>(from: &OnceLock<Arc<T>>) -> OnceLock<Arc<T>> {
    from.get()
        .map_or_else(OnceLock::new, |c| OnceLock::from(Arc::clone(c)))
}

/// The cluster snapshot: hosts `0..host_count()` and running VMs
/// `0..vm_count()`, as columns; a column not set is fetched from `F` when
/// first read.
pub struct Inventory<F: Fetch = Defaults> {
    fetch: F,
    host_count: usize,
    vm_count: usize,
    host_metrics: Slots<Vec<f64>, { HostMetric::COUNT }>,
    host_statuses: OnceLock<Arc<Vec<HostStatus>>>,
    host_flags: Slots<Vec<bool>, { HostFlag::COUNT }>,
    host_texts: Slots<Interned, { HostText::COUNT }>,
    host_labels: Slots<Labels, { HostLabels::COUNT }>,
    /// By name, in a `BTreeMap`: a handful per cluster, listed in name
    /// order, and making one asks nothing of the platform (std's
    /// `HashMap::new` seeds its hasher from `wasi:random` inside a unit,
    /// a host call on every call that builds this snapshot).
    named_metrics: Mutex<BTreeMap<String, Arc<Vec<f64>>>>,
    /// The column of a metric no host reports (all NaN), made once and
    /// shared by every read of an unknown name where unknown names are not
    /// remembered ([`Fetch::REMEMBERS_NAMED_METRICS`]): a unit asks for its
    /// parameter's per-host override on every call, and most hosts report
    /// none, so building the column per read cost a fresh 80 KB at 10,000
    /// hosts each time.
    unreported: OnceLock<Arc<Vec<f64>>>,
    vm_hosts: OnceLock<Arc<Vec<u32>>>,
    vm_metrics: Slots<Vec<f64>, { VmMetric::COUNT }>,
    vm_flags: Slots<Vec<bool>, { VmFlag::COUNT }>,
    vm_texts: Slots<Interned, { VmText::COUNT }>,
    hardware: HardwareSlots,
    /// VMs after another snapshot's own ([`Inventory::with_more_vms`]):
    /// the VM columns not set are built from both when first read.
    more_vms: Option<Arc<MoreVms<F>>>,
}

/// A VM a snapshot shows after its base snapshot's VMs (a VM placed and
/// not reported yet).
#[derive(Clone, Debug, PartialEq)]
pub struct MoreVm {
    /// Its host's row.
    pub host: u32,
    /// Its id, which is also its value in every text column.
    pub id: String,
    /// Its value in each numeric column, by `VmMetric` position.
    pub metrics: [f64; VmMetric::COUNT],
    /// Its value in each flag column, by `VmFlag` position.
    pub flags: [bool; VmFlag::COUNT],
}

/// The base snapshot's VM columns and the VMs after them.
struct MoreVms<F: Fetch> {
    base: Inventory<F>,
    vms: Vec<MoreVm>,
}

impl<F: Fetch> MoreVms<F> {
    fn vm_hosts(&self) -> Vec<u32> {
        let mut column = self.base.vm_hosts().to_vec();
        column.extend(self.vms.iter().map(|vm| vm.host));
        column
    }

    fn vm_metric(&self, metric: VmMetric) -> Vec<f64> {
        let mut column = self.base.vm_metric(metric).to_vec();
        column.extend(self.vms.iter().map(|vm| vm.metrics[metric as usize]));
        column
    }

    fn vm_flag(&self, flag: VmFlag) -> Vec<bool> {
        let mut column = self.base.vm_flag(flag).to_vec();
        column.extend(self.vms.iter().map(|vm| vm.flags[flag as usize]));
        column
    }

    fn vm_text(&self, text: VmText) -> Interned {
        let mut column = self.base.vm_text(text).clone();
        for vm in &self.vms {
            column.push_new_row(&vm.id);
        }
        column
    }
}

/// A column had the wrong number of rows for the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnLengthError {
    pub column: String,
    pub expected: usize,
    pub actual: usize,
}

impl std::fmt::Display for ColumnLengthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "column `{}` has {} rows, the snapshot has {}",
            self.column, self.actual, self.expected
        )
    }
}

impl std::error::Error for ColumnLengthError {}

fn check_len(column: &str, expected: usize, actual: usize) -> Result<(), ColumnLengthError> {
    if expected == actual {
        Ok(())
    } else {
        Err(ColumnLengthError {
            column: column.to_owned(),
            expected,
            actual,
        })
    }
}

impl Inventory {
    /// An empty snapshot of `host_count` hosts and `vm_count` VMs whose
    /// columns read as defaults until set.
    pub fn new(host_count: usize, vm_count: usize) -> Self {
        Self::fetched(host_count, vm_count, Defaults)
    }

    // The columns set (or read) so far, for `crate::fingerprint`: a column
    // still unset reads as the same default on every row, so leaving it
    // out can only make two equal rows look different, never two
    // different rows alike. VM columns over more VMs are always computed.

    pub(crate) fn given_host_metric(&self, metric: HostMetric) -> Option<&Arc<Vec<f64>>> {
        self.host_metrics[metric as usize].get()
    }

    pub(crate) fn given_host_flag(&self, flag: HostFlag) -> Option<&Arc<Vec<bool>>> {
        self.host_flags[flag as usize].get()
    }

    pub(crate) fn given_host_text(&self, text: HostText) -> Option<&Arc<Interned>> {
        self.host_texts[text as usize].get()
    }

    pub(crate) fn given_host_labels(&self, kind: HostLabels) -> Option<&Arc<Labels>> {
        self.host_labels[kind as usize].get()
    }

    /// The statuses, which every snapshot has (`up` when not given).
    pub(crate) fn host_statuses_column(&self) -> &Arc<Vec<HostStatus>> {
        self.host_statuses(); // sets the column when not given
        self.host_statuses.get().expect("set just above")
    }

    pub(crate) fn given_vm_metric(&self, metric: VmMetric) -> Option<&Arc<Vec<f64>>> {
        match self.more_vms {
            Some(_) => Some(self.vm_metric_column(metric)),
            None => self.vm_metrics[metric as usize].get(),
        }
    }

    pub(crate) fn given_vm_flag(&self, flag: VmFlag) -> Option<&Arc<Vec<bool>>> {
        if self.more_vms.is_some() {
            self.vm_flag(flag); // computed over both snapshots' VMs
        }
        self.vm_flags[flag as usize].get()
    }

    pub(crate) fn given_vm_text(&self, text: VmText) -> Option<&Arc<Interned>> {
        if self.more_vms.is_some() {
            self.vm_text(text); // computed over both snapshots' VMs
        }
        self.vm_texts[text as usize].get()
    }
}

impl<F: Fetch> Inventory<F> {
    /// A snapshot of `host_count` hosts and `vm_count` VMs whose columns
    /// are fetched from `fetch` the first time they are read (inside a
    /// component, from the host import).
    pub fn fetched(host_count: usize, vm_count: usize, fetch: F) -> Self {
        Inventory {
            fetch,
            host_count,
            vm_count,
            host_metrics: std::array::from_fn(|_| OnceLock::new()),
            host_statuses: OnceLock::new(),
            host_flags: std::array::from_fn(|_| OnceLock::new()),
            host_texts: std::array::from_fn(|_| OnceLock::new()),
            host_labels: std::array::from_fn(|_| OnceLock::new()),
            named_metrics: Mutex::new(BTreeMap::new()),
            unreported: OnceLock::new(),
            vm_hosts: OnceLock::new(),
            vm_metrics: std::array::from_fn(|_| OnceLock::new()),
            vm_flags: std::array::from_fn(|_| OnceLock::new()),
            vm_texts: std::array::from_fn(|_| OnceLock::new()),
            hardware: HardwareSlots::new(),
            more_vms: None,
        }
    }

    /// Number of hosts.
    pub fn host_count(&self) -> usize {
        self.host_count
    }

    /// Number of running (or pending) VMs.
    pub fn vm_count(&self) -> usize {
        self.vm_count
    }

    /// A numeric host column.
    pub fn host_metric(&self, metric: HostMetric) -> &[f64] {
        self.host_metric_column(metric)
    }

    /// A numeric host column, shared rather than borrowed: what the
    /// sandbox hands wasmtime to lower into a unit, so the column is
    /// copied once (into the unit's memory), not twice.
    pub fn host_metric_shared(&self, metric: HostMetric) -> Arc<Vec<f64>> {
        Arc::clone(self.host_metric_column(metric))
    }

    fn host_metric_column(&self, metric: HostMetric) -> &Arc<Vec<f64>> {
        self.host_metrics[metric as usize]
            .get_or_init(|| Arc::new(self.fetch.host_metric(metric, self.host_count)))
    }

    /// Each host's status.
    pub fn host_statuses(&self) -> &[HostStatus] {
        self.host_statuses
            .get_or_init(|| Arc::new(self.fetch.host_statuses(self.host_count)))
    }

    /// A boolean host column.
    pub fn host_flag(&self, flag: HostFlag) -> &[bool] {
        self.host_flags[flag as usize]
            .get_or_init(|| Arc::new(self.fetch.host_flag(flag, self.host_count)))
    }

    /// A string host column, interned.
    pub fn host_text(&self, text: HostText) -> &Interned {
        self.host_texts[text as usize]
            .get_or_init(|| Arc::new(self.fetch.host_text(text, self.host_count)))
    }

    /// A key/value host column.
    pub fn host_labels(&self, kind: HostLabels) -> &Labels {
        self.host_labels[kind as usize]
            .get_or_init(|| Arc::new(self.fetch.host_labels(kind, self.host_count)))
    }

    /// An engine-defined metric by name; NaN where a host lacks it.
    pub fn host_named_metric(&self, name: &str) -> Arc<Vec<f64>> {
        let mut cache = self
            .named_metrics
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(column) = cache.get(name) {
            return Arc::clone(column);
        }
        if !F::REMEMBERS_NAMED_METRICS {
            // Every name set is in the cache: this one no host reports.
            let unreported = self
                .unreported
                .get_or_init(|| Arc::new(self.fetch.host_named_metric(name, self.host_count)));
            return Arc::clone(unreported);
        }
        let column = Arc::new(self.fetch.host_named_metric(name, self.host_count));
        cache.insert(name.to_owned(), Arc::clone(&column));
        column
    }

    /// The names of the engine-defined metrics set on this snapshot
    /// (natively; inside a component only those already read).
    pub fn host_named_metric_names(&self) -> Vec<String> {
        let cache = self
            .named_metrics
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.keys().cloned().collect()
    }

    /// Host index of each VM.
    pub fn vm_hosts(&self) -> &[u32] {
        self.vm_hosts_column()
    }

    /// [`Inventory::vm_hosts`], shared (see [`Inventory::host_metric_shared`]).
    pub fn vm_hosts_shared(&self) -> Arc<Vec<u32>> {
        Arc::clone(self.vm_hosts_column())
    }

    fn vm_hosts_column(&self) -> &Arc<Vec<u32>> {
        self.vm_hosts.get_or_init(|| {
            Arc::new(match &self.more_vms {
                Some(more) => more.vm_hosts(),
                None => self.fetch.vm_hosts(self.vm_count),
            })
        })
    }

    /// A numeric VM column.
    pub fn vm_metric(&self, metric: VmMetric) -> &[f64] {
        self.vm_metric_column(metric)
    }

    /// A numeric VM column, shared (see [`Inventory::host_metric_shared`]).
    pub fn vm_metric_shared(&self, metric: VmMetric) -> Arc<Vec<f64>> {
        Arc::clone(self.vm_metric_column(metric))
    }

    fn vm_metric_column(&self, metric: VmMetric) -> &Arc<Vec<f64>> {
        self.vm_metrics[metric as usize].get_or_init(|| {
            Arc::new(match &self.more_vms {
                Some(more) => more.vm_metric(metric),
                None => self.fetch.vm_metric(metric, self.vm_count),
            })
        })
    }

    /// A boolean VM column.
    pub fn vm_flag(&self, flag: VmFlag) -> &[bool] {
        self.vm_flags[flag as usize].get_or_init(|| {
            Arc::new(match &self.more_vms {
                Some(more) => more.vm_flag(flag),
                None => self.fetch.vm_flag(flag, self.vm_count),
            })
        })
    }

    /// A string VM column, interned.
    pub fn vm_text(&self, text: VmText) -> &Interned {
        self.vm_texts[text as usize].get_or_init(|| {
            Arc::new(match &self.more_vms {
                Some(more) => more.vm_text(text),
                None => self.fetch.vm_text(text, self.vm_count),
            })
        })
    }

    /// The NUMA cells of every host.
    pub fn numa_topology(&self) -> &NumaTopology {
        self.hardware
            .numa
            .get_or_init(|| Arc::new(self.fetch.numa_topology(self.host_count)))
    }

    /// A numeric per-cell column, one value per cell of the cluster.
    pub fn cell_metric(&self, metric: CellMetric) -> &[f64] {
        self.hardware.cell_metrics[metric as usize].get_or_init(|| {
            let cells = self.numa_topology().cells();
            Arc::new(self.fetch.cell_metric(metric, cells))
        })
    }

    /// The physical CPUs of every cell.
    pub fn cell_cpus(&self) -> &CellCpus {
        self.hardware.cell_cpus.get_or_init(|| {
            let cells = self.numa_topology().cells();
            Arc::new(self.fetch.cell_cpus(cells))
        })
    }

    /// A yes/no column over the entries of [`Inventory::cell_cpus`].
    pub fn pcpu_flag(&self, flag: PcpuFlag) -> &[bool] {
        self.hardware.pcpu_flags[flag as usize].get_or_init(|| {
            let entries = self.cell_cpus().cpus.len();
            Arc::new(self.fetch.pcpu_flag(flag, entries))
        })
    }

    /// Memory pages per cell and page size.
    pub fn cell_pages(&self) -> &CellPages {
        self.hardware.cell_pages.get_or_init(|| {
            let cells = self.numa_topology().cells();
            Arc::new(self.fetch.cell_pages(cells))
        })
    }

    /// Distances between the cells of each host.
    pub fn cell_distances(&self) -> &CellDistances {
        self.hardware.cell_distances.get_or_init(|| {
            let cells = self.numa_topology().cells();
            Arc::new(self.fetch.cell_distances(cells))
        })
    }

    /// The hosts' assignable PCI devices, as pools.
    pub fn pci_pools(&self) -> &PciPools {
        self.hardware
            .pci_pools
            .get_or_init(|| Arc::new(self.fetch.pci_pools(self.host_count)))
    }

    /// Which pools each host owns (`PciPools::offsets`), without
    /// fetching the pools' columns.
    pub fn pci_pool_offsets(&self) -> &[u32] {
        if let Some(pools) = self.hardware.pci_pools.get() {
            return &pools.offsets;
        }
        self.hardware
            .pci_pool_offsets
            .get_or_init(|| Arc::new(self.fetch.pci_pool_offsets(self.host_count)))
    }

    /// Number of PCI pools in the cluster.
    pub fn pci_pool_count(&self) -> usize {
        self.pci_pool_offsets().last().copied().unwrap_or(0) as usize
    }

    /// One per-pool column, fetched alone: for a unit reading one or two
    /// of the pools' columns. Read from the whole pools when they are
    /// already here; a unit reading most columns reads [`Self::pci_pools`]
    /// instead (reading both ways fetches the column twice).
    pub fn pci_pool_column(&self, column: PoolColumn) -> &[u32] {
        if let Some(pools) = self.hardware.pci_pools.get() {
            return pools.column(column);
        }
        self.hardware.pci_pool_columns[column as usize].get_or_init(|| {
            let pools = self.pci_pool_count();
            Arc::new(self.fetch.pci_pool_column(column, self.host_count, pools))
        })
    }

    /// Each PCI pool's tags, one row per pool.
    pub fn pci_pool_labels(&self) -> &Labels {
        self.hardware.pci_pool_labels.get_or_init(|| {
            let pools = self.pci_pool_count();
            Arc::new(self.fetch.pci_pool_labels(pools))
        })
    }

    /// Mediated device types with free instances.
    pub fn mdev_offers(&self) -> &MdevOffers {
        self.hardware
            .mdev_offers
            .get_or_init(|| Arc::new(self.fetch.mdev_offers(self.host_count)))
    }

    /// Sets the NUMA topology (one row per host); set it before any
    /// per-cell column, whose lengths it gives.
    pub fn set_numa_topology(&mut self, column: NumaTopology) -> Result<(), ColumnLengthError> {
        check_len("numa-cells", self.host_count, column.hosts())?;
        check_len("numa-cells.sockets", column.cells(), column.sockets.len())?;
        self.hardware.numa = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_cell_metric(
        &mut self,
        metric: CellMetric,
        column: Vec<f64>,
    ) -> Result<(), ColumnLengthError> {
        check_len(
            metric.wit_name(),
            self.numa_topology().cells(),
            column.len(),
        )?;
        self.hardware.cell_metrics[metric as usize] = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_cell_cpus(&mut self, column: CellCpus) -> Result<(), ColumnLengthError> {
        check_len("cell-cpus", self.numa_topology().cells(), column.cells())?;
        check_len("cell-cpus.cores", column.cpus.len(), column.cores.len())?;
        self.hardware.cell_cpus = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_pcpu_flag(
        &mut self,
        flag: PcpuFlag,
        column: Vec<bool>,
    ) -> Result<(), ColumnLengthError> {
        check_len(flag.wit_name(), self.cell_cpus().cpus.len(), column.len())?;
        self.hardware.pcpu_flags[flag as usize] = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_cell_pages(&mut self, column: CellPages) -> Result<(), ColumnLengthError> {
        check_len("cell-pages", self.numa_topology().cells(), column.cells())?;
        self.hardware.cell_pages = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_cell_distances(&mut self, column: CellDistances) -> Result<(), ColumnLengthError> {
        check_len(
            "cell-distances",
            self.numa_topology().cells(),
            column.cells(),
        )?;
        self.hardware.cell_distances = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_pci_pools(&mut self, column: PciPools) -> Result<(), ColumnLengthError> {
        check_len("device-pools", self.host_count, column.hosts())?;
        self.hardware.pci_pools = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_pci_pool_labels(&mut self, column: Labels) -> Result<(), ColumnLengthError> {
        check_len(
            "device-pool-labels",
            self.pci_pools().pools(),
            column.rows(),
        )?;
        self.hardware.pci_pool_labels = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_mdev_offers(&mut self, column: MdevOffers) -> Result<(), ColumnLengthError> {
        check_len("mdev-types", self.host_count, column.hosts())?;
        self.hardware.mdev_offers = OnceLock::from(Arc::new(column));
        Ok(())
    }

    // Setters, used natively by the host to build a snapshot. Each checks the
    // column's length; a column can be set once (later sets are refused so a
    // snapshot never changes under a reader).

    pub fn set_host_metric(
        &mut self,
        metric: HostMetric,
        column: Vec<f64>,
    ) -> Result<(), ColumnLengthError> {
        self.set_host_metric_shared(metric, Arc::new(column))
    }

    pub fn set_host_statuses(&mut self, column: Vec<HostStatus>) -> Result<(), ColumnLengthError> {
        self.set_host_statuses_shared(Arc::new(column))
    }

    pub fn set_host_flag(
        &mut self,
        flag: HostFlag,
        column: Vec<bool>,
    ) -> Result<(), ColumnLengthError> {
        self.set_host_flag_shared(flag, Arc::new(column))
    }

    /// Sets a numeric host column that other snapshots may share (see
    /// [`Inventory::share`]); the caller keeps its `Arc` to reuse it.
    pub fn set_host_metric_shared(
        &mut self,
        metric: HostMetric,
        column: Arc<Vec<f64>>,
    ) -> Result<(), ColumnLengthError> {
        check_len(metric.wit_name(), self.host_count, column.len())?;
        self.host_metrics[metric as usize] = OnceLock::from(column);
        Ok(())
    }

    /// Sets the host statuses as a column other snapshots may share, like
    /// [`Inventory::set_host_metric_shared`].
    pub fn set_host_statuses_shared(
        &mut self,
        column: Arc<Vec<HostStatus>>,
    ) -> Result<(), ColumnLengthError> {
        check_len("status", self.host_count, column.len())?;
        self.host_statuses = OnceLock::from(column);
        Ok(())
    }

    /// Sets a yes/no host column other snapshots may share, like
    /// [`Inventory::set_host_metric_shared`].
    pub fn set_host_flag_shared(
        &mut self,
        flag: HostFlag,
        column: Arc<Vec<bool>>,
    ) -> Result<(), ColumnLengthError> {
        check_len(flag.wit_name(), self.host_count, column.len())?;
        self.host_flags[flag as usize] = OnceLock::from(column);
        Ok(())
    }

    pub fn set_host_text(
        &mut self,
        text: HostText,
        column: Interned,
    ) -> Result<(), ColumnLengthError> {
        check_len(text.wit_name(), self.host_count, column.indices.len())?;
        self.host_texts[text as usize] = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_host_labels(
        &mut self,
        kind: HostLabels,
        column: Labels,
    ) -> Result<(), ColumnLengthError> {
        check_len(kind.wit_name(), self.host_count, column.rows())?;
        self.host_labels[kind as usize] = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_host_named_metric(
        &mut self,
        name: impl Into<String>,
        column: Vec<f64>,
    ) -> Result<(), ColumnLengthError> {
        let name = name.into();
        check_len(&name, self.host_count, column.len())?;
        self.named_metrics
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(name, Arc::new(column));
        Ok(())
    }

    pub fn set_vm_hosts(&mut self, column: Vec<u32>) -> Result<(), ColumnLengthError> {
        check_len("vm-hosts", self.vm_count, column.len())?;
        self.vm_hosts = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_vm_metric(
        &mut self,
        metric: VmMetric,
        column: Vec<f64>,
    ) -> Result<(), ColumnLengthError> {
        check_len(metric.wit_name(), self.vm_count, column.len())?;
        self.vm_metrics[metric as usize] = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_vm_flag(
        &mut self,
        flag: VmFlag,
        column: Vec<bool>,
    ) -> Result<(), ColumnLengthError> {
        check_len(flag.wit_name(), self.vm_count, column.len())?;
        self.vm_flags[flag as usize] = OnceLock::from(Arc::new(column));
        Ok(())
    }

    pub fn set_vm_text(&mut self, text: VmText, column: Interned) -> Result<(), ColumnLengthError> {
        check_len(text.wit_name(), self.vm_count, column.indices.len())?;
        self.vm_texts[text as usize] = OnceLock::from(Arc::new(column));
        Ok(())
    }
}

impl<F: Fetch + Clone> Inventory<F> {
    /// A snapshot with the same rows that shares every column already
    /// filled in this one, without copying any. Setting a column on either
    /// snapshot afterwards replaces it there only.
    ///
    /// Why: the host keeps one snapshot per cluster and derives a snapshot
    /// per decision from it, replacing only the few usage columns that
    /// pending placements change; sharing makes that a pointer per column
    /// instead of a copy of every column (tens of megabytes per second at
    /// 10,000 hosts and thousands of decisions a second).
    pub fn share(&self) -> Inventory<F> {
        let mut shared = self.share_hosts(self.vm_count);
        shared.vm_hosts = share_one(&self.vm_hosts);
        shared.vm_metrics = share_slots(&self.vm_metrics);
        shared.vm_flags = share_slots(&self.vm_flags);
        shared.vm_texts = share_slots(&self.vm_texts);
        shared.more_vms = self.more_vms.clone();
        shared
    }

    /// This snapshot with `vms` after its own VMs, sharing every host
    /// column. The VM columns are built (this snapshot's rows, then
    /// `vms`) only when first read.
    ///
    /// Why: a decision's snapshot shows the VMs claimed and not reported
    /// yet; copying every VM column for each decision (30,000 VMs: a
    /// megabyte and a half) cost a tenth of a held decision, although most
    /// policies' units never read a VM column.
    pub fn with_more_vms(&self, vms: Vec<MoreVm>) -> Inventory<F> {
        if vms.is_empty() {
            return self.share();
        }
        let mut inventory = self.share_hosts(self.vm_count + vms.len());
        inventory.more_vms = Some(Arc::new(MoreVms {
            base: self.share(),
            vms,
        }));
        inventory
    }

    /// A snapshot of the same hosts, sharing every host column already
    /// filled in this one (hardware included), with `vm_count` VMs whose
    /// columns are not set.
    ///
    /// Why: a decision's snapshot adds the VMs placed but not yet reported
    /// to the held one; building it from scratch copied every host's
    /// texts, labels and named metrics per decision, though only the VM
    /// rows differ.
    pub fn share_hosts(&self, vm_count: usize) -> Inventory<F> {
        let named = self
            .named_metrics
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        Inventory {
            fetch: self.fetch.clone(),
            host_count: self.host_count,
            vm_count,
            host_metrics: share_slots(&self.host_metrics),
            host_statuses: share_one(&self.host_statuses),
            host_flags: share_slots(&self.host_flags),
            host_texts: share_slots(&self.host_texts),
            host_labels: share_slots(&self.host_labels),
            named_metrics: Mutex::new(named),
            unreported: share_one(&self.unreported),
            vm_hosts: OnceLock::new(),
            vm_metrics: std::array::from_fn(|_| OnceLock::new()),
            vm_flags: std::array::from_fn(|_| OnceLock::new()),
            vm_texts: std::array::from_fn(|_| OnceLock::new()),
            hardware: self.hardware.share(),
            more_vms: None,
        }
    }
}

fn default_interned(rows: usize) -> Interned {
    Interned::from_values([""], vec![0; rows])
}

fn default_labels(rows: usize) -> Labels {
    Labels {
        offsets: vec![0; rows + 1],
        ..Labels::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fetch that serves pools only, counting the whole-pools reads, to
    /// tell a column read alone from one cut from the whole pools.
    struct Pools(PciPools, std::sync::atomic::AtomicUsize);

    impl Fetch for Pools {
        fn host_metric(&self, m: HostMetric, rows: usize) -> Vec<f64> {
            Defaults.host_metric(m, rows)
        }
        fn host_statuses(&self, rows: usize) -> Vec<HostStatus> {
            Defaults.host_statuses(rows)
        }
        fn host_flag(&self, f: HostFlag, rows: usize) -> Vec<bool> {
            Defaults.host_flag(f, rows)
        }
        fn host_text(&self, t: HostText, rows: usize) -> Interned {
            Defaults.host_text(t, rows)
        }
        fn host_labels(&self, k: HostLabels, rows: usize) -> Labels {
            Defaults.host_labels(k, rows)
        }
        fn host_named_metric(&self, n: &str, rows: usize) -> Vec<f64> {
            Defaults.host_named_metric(n, rows)
        }
        fn vm_hosts(&self, rows: usize) -> Vec<u32> {
            Defaults.vm_hosts(rows)
        }
        fn vm_metric(&self, m: VmMetric, rows: usize) -> Vec<f64> {
            Defaults.vm_metric(m, rows)
        }
        fn vm_flag(&self, f: VmFlag, rows: usize) -> Vec<bool> {
            Defaults.vm_flag(f, rows)
        }
        fn vm_text(&self, t: VmText, rows: usize) -> Interned {
            Defaults.vm_text(t, rows)
        }
        fn numa_topology(&self, hosts: usize) -> NumaTopology {
            Defaults.numa_topology(hosts)
        }
        fn cell_metric(&self, m: CellMetric, cells: usize) -> Vec<f64> {
            Defaults.cell_metric(m, cells)
        }
        fn cell_cpus(&self, cells: usize) -> CellCpus {
            Defaults.cell_cpus(cells)
        }
        fn pcpu_flag(&self, f: PcpuFlag, entries: usize) -> Vec<bool> {
            Defaults.pcpu_flag(f, entries)
        }
        fn cell_pages(&self, cells: usize) -> CellPages {
            Defaults.cell_pages(cells)
        }
        fn cell_distances(&self, cells: usize) -> CellDistances {
            Defaults.cell_distances(cells)
        }
        fn pci_pools(&self, _: usize) -> PciPools {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.clone()
        }
        fn pci_pool_labels(&self, pools: usize) -> Labels {
            Defaults.pci_pool_labels(pools)
        }
        fn mdev_offers(&self, hosts: usize) -> MdevOffers {
            Defaults.mdev_offers(hosts)
        }
        fn pci_pool_offsets(&self, _: usize) -> Vec<u32> {
            self.0.offsets.clone()
        }
        fn pci_pool_column(&self, column: PoolColumn, _: usize, pools: usize) -> Vec<u32> {
            assert_eq!(
                pools,
                self.0.free.len(),
                "the pool count comes from the offsets"
            );
            self.0.column(column).to_vec()
        }
    }

    #[test]
    fn a_pool_column_is_read_alone_or_cut_from_the_whole_pools() {
        let pools = PciPools {
            offsets: vec![0, 2, 2, 3],
            free: vec![1, 0, 4],
            total: vec![2, 1, 4],
            ..PciPools::default()
        };
        let fetched = Inventory::fetched(3, 0, Pools(pools.clone(), Default::default()));
        assert_eq!(fetched.pci_pool_offsets(), [0, 2, 2, 3]);
        assert_eq!(fetched.pci_pool_count(), 3);
        assert_eq!(fetched.pci_pool_column(PoolColumn::Free), [1, 0, 4]);
        assert_eq!(
            fetched.fetch.1.load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        assert_eq!(fetched.pci_pools().total, [2, 1, 4]);
        assert_eq!(
            fetched.fetch.1.load(std::sync::atomic::Ordering::Relaxed),
            1
        );

        let mut held = Inventory::new(3, 0);
        held.set_pci_pools(pools).expect("one row per host");
        assert_eq!(held.pci_pool_column(PoolColumn::Total), [2, 1, 4]);
        assert!(std::ptr::eq(
            held.pci_pool_column(PoolColumn::Free),
            held.pci_pools().free.as_slice()
        ));
    }

    #[test]
    fn more_vms_follow_the_base_vms_in_every_column_when_read() {
        let mut base = Inventory::new(2, 1);
        base.set_vm_hosts(vec![1]).expect("one row");
        base.set_vm_metric(VmMetric::MemoryMib, vec![512.0])
            .expect("one row");
        base.set_vm_text(VmText::Id, Interned::from_rows(["running"]))
            .expect("one row");
        let more = |host, id: &str, memory| MoreVm {
            host,
            id: id.to_owned(),
            metrics: std::array::from_fn(|i| {
                if VmMetric::ALL[i] == VmMetric::MemoryMib {
                    memory
                } else {
                    0.0
                }
            }),
            flags: std::array::from_fn(|i| VmFlag::ALL[i] == VmFlag::Pending),
        };
        let mut derived = base.with_more_vms(vec![more(0, "a", 1024.0), more(1, "b", 2048.0)]);
        assert_eq!(derived.vm_count(), 3);
        assert_eq!(derived.vm_hosts(), [1, 0, 1]);
        assert_eq!(
            derived.vm_metric(VmMetric::MemoryMib),
            [512.0, 1024.0, 2048.0]
        );
        assert_eq!(derived.vm_flag(VmFlag::Pending), [false, true, true]);
        let ids = derived.vm_text(VmText::Id);
        assert_eq!((ids.get(0), ids.get(1), ids.get(2)), ("running", "a", "b"));
        // Names were never set: the base's default, then each VM's id.
        assert_eq!(derived.vm_text(VmText::Name).get(2), "b");
        // A share reads the same rows; the base is untouched.
        assert_eq!(derived.share().vm_hosts(), [1, 0, 1]);
        assert_eq!(base.vm_count(), 1);
        assert_eq!(base.vm_hosts(), [1]);
        // A column set on the derived snapshot replaces the built one.
        derived
            .set_vm_metric(VmMetric::Vcpus, vec![1.0, 2.0, 3.0])
            .expect("three rows");
        assert_eq!(derived.vm_metric(VmMetric::Vcpus), [1.0, 2.0, 3.0]);
        // None: the base shared whole.
        assert_eq!(base.with_more_vms(Vec::new()).vm_count(), 1);
    }

    #[test]
    fn a_shared_snapshot_reads_the_same_columns_and_replaces_its_own() {
        let mut base = Inventory::new(2, 1);
        base.set_host_metric(HostMetric::MemoryFreeMib, vec![1.0, 2.0])
            .expect("two rows");
        base.set_host_text(HostText::Id, Interned::from_rows(["a", "b"]))
            .expect("two rows");
        base.set_host_named_metric("x", vec![3.0, 4.0])
            .expect("two rows");
        let mut derived = base.share();
        derived
            .set_host_metric_shared(HostMetric::MemoryFreeMib, Arc::new(vec![5.0, 6.0]))
            .expect("two rows");
        assert_eq!(derived.host_metric(HostMetric::MemoryFreeMib), [5.0, 6.0]);
        assert_eq!(base.host_metric(HostMetric::MemoryFreeMib), [1.0, 2.0]);
        assert_eq!(derived.host_text(HostText::Id).get(1), "b");
        assert_eq!(derived.host_named_metric("x")[1], 4.0);
        assert_eq!((derived.host_count(), derived.vm_count()), (2, 1));
        assert!(
            derived
                .set_host_metric_shared(HostMetric::CpuCores, Arc::new(vec![1.0]))
                .is_err()
        );
    }

    #[test]
    fn a_snapshot_sharing_the_hosts_has_the_same_hosts_and_new_vm_rows() {
        let mut base = Inventory::new(2, 1);
        base.set_host_text(HostText::Id, Interned::from_rows(["a", "b"]))
            .expect("two rows");
        base.set_host_named_metric("x", vec![3.0, 4.0])
            .expect("two rows");
        base.set_vm_hosts(vec![1]).expect("one row");
        let mut derived = base.share_hosts(3);
        assert_eq!((derived.host_count(), derived.vm_count()), (2, 3));
        // The same column, not a copy.
        assert!(std::ptr::eq(
            base.host_text(HostText::Id),
            derived.host_text(HostText::Id)
        ));
        assert_eq!(derived.host_named_metric("x")[1], 4.0);
        // VM columns start unset, at the new length.
        assert_eq!(derived.vm_hosts(), [0, 0, 0]);
        derived.set_vm_hosts(vec![1, 0, 1]).expect("three rows");
        assert!(derived.set_vm_hosts(vec![1]).is_err());
        assert_eq!(base.vm_hosts(), [1]);
    }

    #[test]
    fn metrics_no_host_reports_read_as_one_shared_column_of_nan() {
        let mut base = Inventory::new(2, 0);
        base.set_host_named_metric("x", vec![3.0, 4.0])
            .expect("two rows");
        let unreported = base.host_named_metric("ratio");
        assert!(unreported.iter().all(|v| v.is_nan()) && unreported.len() == 2);
        // Another unknown name, and a snapshot sharing the hosts, read the
        // same column instead of building one per read.
        assert!(Arc::ptr_eq(&unreported, &base.host_named_metric("other")));
        assert!(Arc::ptr_eq(
            &unreported,
            &base.share_hosts(1).host_named_metric("ratio")
        ));
        // Unknown names are not listed as set, and set ones still read as set.
        assert_eq!(base.host_named_metric_names(), ["x"]);
        assert_eq!(*base.host_named_metric("x"), [3.0, 4.0]);
    }
}
