//! Hardware fitting shared by policy units: does a VM fit one host's NUMA
//! cells, dedicated CPUs, memory pages, PCI device pools and mediated
//! devices, **with which assignment** ([`Assignment`]), and if not, **why**
//! ([`Unfit`], which displays as a sentence with figures).
//!
//! The semantics are Nova's (nova/virt/hardware.py
//! `numa_fit_instance_to_host`, `_numa_fit_instance_cell`,
//! `_pack_instance_onto_cores`; nova/pci/stats.py `support_requests`,
//! `_filter_pools`), re-implemented over the inventory's compressed columns
//! (`sandpiper_model::hardware`). Where Sandpiper's data differs from
//! Nova's objects, the mapping is:
//!
//! - a host cell's `pcpuset` (Nova's `cpu_dedicated_set`) is the cell's
//!   CPUs flagged [`PcpuFlag::Dedicated`](sandpiper_model::hardware::PcpuFlag::Dedicated); its `cpuset` (CPUs for shared
//!   vCPUs, `cpu_shared_set`) is the cell's other CPUs, so its size is
//!   `cpus - dedicated-cpus` (cell metrics). Free dedicated CPUs are the
//!   dedicated ones not flagged [`PcpuFlag::Pinned`](sandpiper_model::hardware::PcpuFlag::Pinned);
//! - `siblings` are the cell's CPUs grouped by their `cores` number; groups
//!   are taken in the order of their lowest CPU, threads in ascending order
//!   (Nova iterates Python sets of small integers, which is that order);
//! - `avail_memory` is the cell metric `memory-free-mib`, `memory` is
//!   `memory-total-mib`, `memory_usage` their difference, `cpu_usage` is
//!   `shared-vcpus-used`; pages are `cell-pages` (`free` pages, not
//!   `total - used - reserved`);
//! - Nova's `isolate` check against hosts configured with hyperthreads
//!   (`threads_per_core != 1 and pcpuset != cpuset`, bug #1889633) passes
//!   when every CPU of the cell is dedicated: such a cell is read as
//!   Nova's legacy `vcpu_pin_set` configuration, where one thread of a
//!   core is pinned and its siblings are reserved with it;
//! - a guest cell's `host-nodes` (oVirt's vNUMA pinning; Nova has none)
//!   restricts the host cells it may take; `numa-tune` is not used;
//! - PCI pools are matched on `free` devices; a physical function taken
//!   makes its virtual functions' pools unavailable and a virtual function
//!   taken makes its physical function unavailable, within one fit (Nova's
//!   scheduler-side `support_requests` ignores dependents; its claim does
//!   not).
//!
//! Use: build a [`Fitter`] once per request (it normalises the VM's
//! request, including Nova's implicit single-cell topology, and owns the
//! scratch buffers), then call [`Fitter::fit`] per host, or
//! [`Fitter::check`] where only the verdict matters (a filter). After the
//! first hosts a fit allocates nothing.

mod cpus;
mod pci;

use std::fmt;
use std::ops::Range;

use sandpiper_model::hardware::NONE;
use sandpiper_model::inventory::{Defaults, Fetch};
use sandpiper_model::reason::render;
use sandpiper_model::{
    CellMetric, CpuPolicy, EmulatorThreads, Inventory, PageSize, ThreadPolicy, Vm,
};

pub use pci::{PciSpecKey, PciWant};

/// Which parts of a VM's hardware request a fit checks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Fit the guest NUMA topology (explicit or implicit) onto host cells.
    pub numa: bool,
    /// Whether and how PCI requests are checked.
    pub pci: PciCheck,
    /// Take one free instance per requested mediated device type.
    pub mdev: bool,
    /// Nova's `NUMATopologyLimits` for guest cells with shared vCPUs;
    /// `None` checks no allocation ratio (Nova's `limits=None`).
    pub limits: Option<Limits>,
    /// Nova's `[compute] packing_host_numa_cells_allocation_strategy`:
    /// `false` (Nova's default) tries the emptiest host cells first.
    pub pack: bool,
}

impl Options {
    /// What Nova's `NUMATopologyFilter` checks: the NUMA topology with
    /// these limits, and PCI requests only inside a NUMA fit.
    pub fn nova_numa_filter(limits: Limits) -> Options {
        Options {
            numa: true,
            pci: PciCheck::WithNumaTopology,
            mdev: false,
            limits: Some(limits),
            pack: false,
        }
    }

    /// What Nova's `PciPassthroughFilter` checks: PCI requests, without
    /// NUMA affinity.
    pub fn nova_pci_filter() -> Options {
        Options {
            numa: false,
            pci: PciCheck::Always,
            mdev: false,
            limits: None,
            pack: false,
        }
    }

    /// Everything, for a claim: NUMA (without ratios: `limits` `None`),
    /// PCI (with NUMA affinity when the VM has a topology), mediated devices.
    pub fn everything() -> Options {
        Options {
            numa: true,
            pci: PciCheck::Always,
            mdev: true,
            limits: None,
            pack: false,
        }
    }
}

/// How PCI requests are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PciCheck {
    /// Not at all.
    Off,
    /// Only as part of a NUMA fit (Nova's `NUMATopologyFilter`): with the
    /// chosen cells' affinity, and not at all for a VM without topology.
    WithNumaTopology,
    /// Always: with the chosen cells' affinity when a NUMA topology was
    /// fitted, else without (Nova's `PciPassthroughFilter`).
    Always,
}

/// Nova's `NUMATopologyLimits`: allocation ratios for shared vCPUs and
/// memory of guest cells without pinning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub cpu_allocation_ratio: f64,
    pub ram_allocation_ratio: f64,
}

/// One guest cell as fitted: the VM's cell (explicit or Nova's implicit
/// one), normalised.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GuestCell {
    /// vCPUs on shared host CPUs (Nova's instance cell `cpuset`).
    pub shared_vcpus: Vec<u32>,
    /// vCPUs to pin, ascending (Nova's instance cell `pcpuset`).
    pub pinned_vcpus: Vec<u32>,
    pub memory_mib: f64,
    /// Host cells (their node numbers) this cell may take; empty: any.
    pub host_nodes: Vec<u32>,
}

/// The VM's hardware request, normalised once per request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Wanted {
    /// The guest topology; empty when the VM needs none (no cells, no
    /// pinning, no page size).
    pub cells: Vec<GuestCell>,
    pub cpu_policy: CpuPolicy,
    pub thread_policy: ThreadPolicy,
    /// Emulator threads on a dedicated CPU of guest cell 0's host cell
    /// (Nova: `isolate` with pinned vCPUs only).
    pub emulator_isolated: bool,
    pub page_size: PageSize,
    pub pci: Vec<PciWant>,
    pub mdev_types: Vec<String>,
    /// Why the request cannot be fitted anywhere, when it is malformed.
    pub invalid: Option<&'static str>,
}

impl Wanted {
    /// Normalises `vm`'s hardware request. A VM whose `cpu_policy` is
    /// `dedicated` or which asks for a `page_size` but lists no cells gets
    /// Nova's implicit topology: one cell with all `vcpus` and `memory_mib`.
    pub fn from_vm(vm: &Vm) -> Wanted {
        let hw = &vm.hardware;
        let pinned_policy = hw.cpu_policy != CpuPolicy::Shared;
        let mut invalid = None;
        let mut cells: Vec<GuestCell> = hw
            .numa_cells
            .iter()
            .map(|cell| {
                let (mut shared, mut pinned) = match hw.cpu_policy {
                    CpuPolicy::Shared => {
                        let mut all = cell.shared_vcpus.clone();
                        all.extend_from_slice(&cell.dedicated_vcpus);
                        (all, Vec::new())
                    }
                    CpuPolicy::Dedicated => {
                        let mut all = cell.dedicated_vcpus.clone();
                        all.extend_from_slice(&cell.shared_vcpus);
                        (Vec::new(), all)
                    }
                    CpuPolicy::Mixed => (cell.shared_vcpus.clone(), cell.dedicated_vcpus.clone()),
                };
                shared.sort_unstable();
                pinned.sort_unstable();
                GuestCell {
                    shared_vcpus: shared,
                    pinned_vcpus: pinned,
                    memory_mib: cell.memory_mib,
                    host_nodes: cell.host_nodes.clone(),
                }
            })
            .collect();
        if cells.is_empty()
            && (hw.cpu_policy != CpuPolicy::Shared || hw.page_size != PageSize::Unspecified)
        {
            let all: Vec<u32> = (0..vm.vcpus).collect();
            let (shared, pinned) = match hw.cpu_policy {
                CpuPolicy::Shared => (all, Vec::new()),
                CpuPolicy::Dedicated => (Vec::new(), all),
                CpuPolicy::Mixed => {
                    invalid = Some(
                        "a mixed CPU policy needs NUMA cells saying which vCPUs are dedicated",
                    );
                    (all, Vec::new())
                }
            };
            cells.push(GuestCell {
                shared_vcpus: shared,
                pinned_vcpus: pinned,
                memory_mib: vm.memory_mib,
                host_nodes: Vec::new(),
            });
        }
        Wanted {
            cells,
            cpu_policy: hw.cpu_policy,
            thread_policy: hw.thread_policy,
            emulator_isolated: pinned_policy && hw.emulator_threads == EmulatorThreads::Isolate,
            page_size: hw.page_size,
            pci: hw.pci_requests.iter().map(PciWant::from_request).collect(),
            mdev_types: hw.mdev_types.clone(),
            invalid,
        }
    }

    /// Whether vCPUs are pinned (`dedicated` or `mixed`).
    pub fn pins(&self) -> bool {
        self.cpu_policy != CpuPolicy::Shared
    }
}

/// Where one guest cell went. Ranges index [`Assignment::pinning`] and
/// [`Assignment::claimed_cpus`]; read them with [`Assignment::cell_pinning`]
/// and [`Assignment::cell_claimed_cpus`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CellFit {
    /// The guest cell (index into [`Wanted::cells`]).
    pub guest_cell: u32,
    /// The host cell, cluster-wide index (`numa-topology` row).
    pub host_cell: u32,
    /// The host cell's own node number (`numa-topology.node-ids`).
    pub node: u32,
    /// vCPUs on the cell's shared CPUs (add to `shared-vcpus-used`).
    pub shared_vcpus: u32,
    /// (vCPU, host CPU) pairs, ascending by vCPU.
    pub pinning: Range<u32>,
    /// Host CPUs this cell takes: the pinned ones and, with the `isolate`
    /// thread policy, their sibling threads (Nova reserves those too); not
    /// the emulator CPU.
    pub claimed: Range<u32>,
    pub memory_mib: f64,
    /// The page size chosen, KiB; 0 when the host cell reports no pages.
    pub page_size_kib: u32,
    /// Pages of `page_size_kib` taken (memory / page size); 0 with no size.
    pub pages: u64,
}

/// Devices taken from one pool for one PCI request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PciTake {
    /// Index into the VM's `pci_requests`.
    pub request: u32,
    /// The pool, cluster-wide index (`pci-pools` row).
    pub pool: u32,
    pub count: u32,
}

/// One mediated device instance taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MdevTake {
    /// Index into the VM's `mdev_types`.
    pub request: u32,
    /// The entry, cluster-wide index (`mdev-offers` row).
    pub entry: u32,
}

/// A successful fit: what the VM takes on the host. Empty parts were not
/// requested (or not checked, see [`Options`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assignment {
    /// One per guest cell, in guest cell order.
    pub cells: Vec<CellFit>,
    /// Every cell's (vCPU, host CPU) pairs; see [`CellFit::pinning`].
    pub pinning: Vec<(u32, u32)>,
    /// Every cell's taken host CPUs; see [`CellFit::claimed`].
    pub claimed_cpus: Vec<u32>,
    /// The host CPU reserved for emulator threads (`isolate`), in guest
    /// cell 0's host cell.
    pub emulator_cpu: Option<u32>,
    pub pci: Vec<PciTake>,
    pub mdevs: Vec<MdevTake>,
}

impl Assignment {
    /// Guest cell `cell`'s (vCPU, host CPU) pairs.
    pub fn cell_pinning(&self, cell: usize) -> &[(u32, u32)] {
        self.cells.get(cell).map_or(&[], |c| {
            &self.pinning[c.pinning.start as usize..c.pinning.end as usize]
        })
    }

    /// Guest cell `cell`'s taken host CPUs.
    pub fn cell_claimed_cpus(&self, cell: usize) -> &[u32] {
        self.cells.get(cell).map_or(&[], |c| {
            &self.claimed_cpus[c.claimed.start as usize..c.claimed.end as usize]
        })
    }

    fn clear(&mut self) {
        self.cells.clear();
        self.pinning.clear();
        self.claimed_cpus.clear();
        self.emulator_cpu = None;
        self.pci.clear();
        self.mdevs.clear();
    }
}

/// What a guest cell lacked on a host cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shortfall {
    /// The host cell is not among the guest cell's `host_nodes`.
    NotInHostNodes,
    /// No page size allowed by the request has enough free pages (or the
    /// memory is not a multiple of it, or the size is not reported).
    Pages {
        page_size: PageSize,
        memory_mib: f64,
        /// Free memory in the largest allowed size, MiB (0 if none).
        largest_free_mib: f64,
    },
    /// Not enough memory: free memory for pinned cells, total otherwise
    /// (Nova does not let a cell overcommit against itself).
    Memory { wanted_mib: f64, available_mib: f64 },
    /// Fewer dedicated CPUs in the cell than pinned vCPUs (+1 emulator).
    DedicatedCpus { wanted: u32, cell: u32 },
    /// Fewer shared CPUs in the cell than shared vCPUs.
    SharedCpus { wanted: u32, cell: u32 },
    /// Fewer free (unpinned) dedicated CPUs than pinned vCPUs (+1 emulator).
    FreeDedicatedCpus { wanted: u32, free: u32 },
    /// Shared vCPUs over the cell's allocation ratio.
    CpuRatio { usage: f64, limit: f64 },
    /// Memory over the cell's allocation ratio, MiB.
    MemoryRatio { usage_mib: f64, limit_mib: f64 },
    /// The free CPUs cannot be laid out as the thread policy asks.
    ThreadPolicy {
        policy: ThreadPolicy,
        wanted: u32,
        free: u32,
        /// The cell's threads per core.
        threads_per_core: u32,
    },
}

/// Which filtering step a PCI request failed at (Nova's `_filter_pools`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PciStage {
    /// Too few free devices match the request's specs.
    Spec,
    /// Too few of those have the NUMA affinity the policy asks.
    Affinity,
    /// Too few once physical functions not asked for are left out.
    PhysicalFunctions,
}

/// Why a VM does not fit a host.
#[derive(Clone, Debug, PartialEq)]
pub enum Unfit {
    /// The request itself cannot be fitted (see [`Wanted::invalid`]).
    Invalid(&'static str),
    /// The VM needs a NUMA topology and the host reports no cells.
    NoNumaTopology,
    /// More guest cells than host cells.
    TooFewCells { wanted: u32, host: u32 },
    /// `dedicated` with the `require` thread policy on a host without
    /// hyperthreads (Nova's `_satisfies_cpu_policy`).
    NoHyperthreads,
    /// A guest cell fits no host cell; the first failure in Nova's order.
    Cell {
        guest_cell: u32,
        /// The host cell's node number.
        node: u32,
        short: Shortfall,
    },
    /// A PCI request cannot be met (for every placement of the cells).
    Pci {
        request: u32,
        stage: PciStage,
        wanted: u32,
        /// Free devices left at that stage.
        available: u32,
    },
    /// A mediated device type has no free instance.
    Mdev {
        request: u32,
        wanted: u32,
        free: u32,
    },
}

/// The figures of a reason: up to five numbers for a template's `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    values: [f64; 5],
    len: usize,
}

impl Figures {
    fn of(figures: &[f64]) -> Figures {
        let mut out = Figures::default();
        for (slot, &f) in out.values.iter_mut().zip(figures) {
            *slot = f;
        }
        out.len = figures.len().min(5);
        out
    }

    /// The figures, one per placeholder of the template.
    pub fn as_slice(&self) -> &[f64] {
        &self.values[..self.len]
    }
}

/// `guest cell {}: host NUMA node {} ` followed by the rest.
macro_rules! cell_template {
    ($rest:literal) => {
        concat!("guest cell {}: host NUMA node {} ", $rest)
    };
}

impl Unfit {
    /// The reason as a template and its figures, for
    /// `Rejections::reject_with`: one static template per kind of
    /// shortfall, so thousands of hosts failing alike send one string.
    pub fn template(&self) -> (&'static str, Figures) {
        let f = |v: &[f64]| Figures::of(v);
        match *self {
            Unfit::Invalid(why) => (why, f(&[])),
            Unfit::NoNumaTopology => (
                "the host reports no NUMA topology and the VM needs one",
                f(&[]),
            ),
            Unfit::TooFewCells { wanted, host } => (
                "the host has {} NUMA cells, the VM needs {}",
                f(&[host.into(), wanted.into()]),
            ),
            Unfit::NoHyperthreads => (
                "the host has no hyperthreads and the VM's thread policy requires them",
                f(&[]),
            ),
            Unfit::Cell {
                guest_cell,
                node,
                short,
            } => {
                let (g, n) = (f64::from(guest_cell), f64::from(node));
                match short {
                    Shortfall::NotInHostNodes => (
                        cell_template!("is not among the cell's host nodes"),
                        f(&[g, n]),
                    ),
                    Shortfall::Pages {
                        page_size,
                        memory_mib,
                        largest_free_mib,
                    } => {
                        let (t, size): (&'static str, Option<f64>) = match page_size {
                            PageSize::Kib(k) => (
                                cell_template!(
                                    "has no free {} KiB pages for {} MiB (free: {} MiB)"
                                ),
                                Some(k.into()),
                            ),
                            PageSize::Small => (
                                cell_template!("has no free small pages for {} MiB (free: {} MiB)"),
                                None,
                            ),
                            PageSize::Large => (
                                cell_template!(
                                    "has no free large pages for {} MiB (largest: {} MiB free)"
                                ),
                                None,
                            ),
                            PageSize::Any | PageSize::Unspecified => (
                                cell_template!(
                                    "has no free pages of any size for {} MiB (largest: {} MiB free)"
                                ),
                                None,
                            ),
                        };
                        match size {
                            Some(k) => (t, f(&[g, n, k, memory_mib, largest_free_mib])),
                            None => (t, f(&[g, n, memory_mib, largest_free_mib])),
                        }
                    }
                    Shortfall::Memory {
                        wanted_mib,
                        available_mib,
                    } => (
                        cell_template!("has {} MiB of memory, {} MiB needed"),
                        f(&[g, n, available_mib, wanted_mib]),
                    ),
                    Shortfall::DedicatedCpus { wanted, cell } => (
                        cell_template!("has {} dedicated CPUs, {} needed"),
                        f(&[g, n, cell.into(), wanted.into()]),
                    ),
                    Shortfall::SharedCpus { wanted, cell } => (
                        cell_template!("has {} shared CPUs, {} needed"),
                        f(&[g, n, cell.into(), wanted.into()]),
                    ),
                    Shortfall::FreeDedicatedCpus { wanted, free } => (
                        cell_template!("has {} free dedicated CPUs, {} needed"),
                        f(&[g, n, free.into(), wanted.into()]),
                    ),
                    Shortfall::CpuRatio { usage, limit } => (
                        cell_template!("would have {} shared vCPUs, over its limit of {}"),
                        f(&[g, n, usage, limit]),
                    ),
                    Shortfall::MemoryRatio {
                        usage_mib,
                        limit_mib,
                    } => (
                        cell_template!("would use {} MiB of memory, over its limit of {} MiB"),
                        f(&[g, n, usage_mib, limit_mib]),
                    ),
                    Shortfall::ThreadPolicy {
                        policy,
                        wanted,
                        free,
                        threads_per_core,
                    } => (
                        match policy {
                            ThreadPolicy::Prefer => cell_template!(
                                "cannot pin {} CPUs on its {} free CPUs ({} threads per core)"
                            ),
                            ThreadPolicy::Isolate => cell_template!(
                                "cannot pin {} CPUs on its {} free CPUs ({} threads per core) with the isolate thread policy"
                            ),
                            ThreadPolicy::Require => cell_template!(
                                "cannot pin {} CPUs on its {} free CPUs ({} threads per core) with the require thread policy"
                            ),
                        },
                        f(&[g, n, wanted.into(), free.into(), threads_per_core.into()]),
                    ),
                }
            }
            Unfit::Pci {
                request,
                stage,
                wanted,
                available,
            } => (
                match stage {
                    PciStage::Spec => "PCI request {}: {} free matching devices, {} needed",
                    PciStage::Affinity => {
                        "PCI request {}: {} free matching devices with the NUMA affinity asked, {} needed"
                    }
                    PciStage::PhysicalFunctions => {
                        "PCI request {}: {} free matching devices besides physical functions not asked for, {} needed"
                    }
                },
                f(&[request.into(), available.into(), wanted.into()]),
            ),
            Unfit::Mdev {
                request,
                wanted,
                free,
            } => (
                "mediated device request {}: {} free instances of its type, {} needed",
                f(&[request.into(), free.into(), wanted.into()]),
            ),
        }
    }
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (template, figures) = self.template();
        f.write_str(&render(template, figures.as_slice()))
    }
}

/// Fits one VM onto hosts of one inventory, one host at a time. Holds the
/// normalised request and scratch buffers, so it is made once per request.
pub struct Fitter<'a, F: Fetch = Defaults> {
    inventory: &'a Inventory<F>,
    wanted: Wanted,
    options: Options,
    /// Each guest cell's memory in KiB, converted once per request (the
    /// conversion rounds, a library call inside a component).
    memory_kib: Vec<u64>,
    scratch: Scratch,
    assignment: Assignment,
}

/// Reused buffers: a fit allocates only while they grow.
#[derive(Default)]
struct Scratch {
    /// Host cells (cluster-wide) in the order they are tried.
    order: Vec<u32>,
    /// Per (guest cell, tried position): 0 unknown, 1 fits, 2 does not.
    pairs: Vec<u8>,
    /// The chosen host cell per guest cell during the search.
    chosen: Vec<u32>,
    /// Per host cell (local index): its figures, read once per host.
    cells: Vec<CellData>,
    /// The host's first cell (cluster-wide).
    first_cell: usize,
    cpus: cpus::CellView,
    pci: pci::PciScratch,
    /// Sets of host cells (bit masks of host-local cells) on which the PCI
    /// requests failed, for the host at hand: the PCI fit depends only on
    /// which cells the guest cells took, not on their order, so each set
    /// is checked once instead of once per permutation.
    pci_failed: Vec<u64>,
    mdev_taken: Vec<u32>,
}

/// One host cell's figures (cell metrics, node, free PCI devices).
#[derive(Clone, Copy, Debug, Default)]
struct CellData {
    node: u32,
    total: f64,
    free: f64,
    cpus: u32,
    dedicated: u32,
    pinned: u32,
    used: f64,
    pci: u32,
    /// The page size chosen for the last memory asked (KiB), or the
    /// largest free memory when none fits.
    page_memo: Option<(u64, Result<u32, f64>)>,
}

/// The first failures met while searching placements of the cells.
#[derive(Default)]
struct Failures {
    cell: Option<Unfit>,
    pci: Option<Unfit>,
}

impl<'a, F: Fetch> Fitter<'a, F> {
    /// A fitter for `vm` over `inventory`.
    pub fn new(inventory: &'a Inventory<F>, vm: &Vm, options: Options) -> Self {
        Self::from_wanted(inventory, Wanted::from_vm(vm), options)
    }

    /// A fitter for an already normalised request.
    pub fn from_wanted(inventory: &'a Inventory<F>, wanted: Wanted, options: Options) -> Self {
        Fitter {
            inventory,
            memory_kib: wanted
                .cells
                .iter()
                .map(|c| mib_to_kib(c.memory_mib))
                .collect(),
            wanted,
            options,
            scratch: Scratch::default(),
            assignment: Assignment::default(),
        }
    }

    /// Changes the limits for the next fits (Nova's ratios are per host).
    pub fn set_limits(&mut self, limits: Option<Limits>) {
        self.options.limits = limits;
    }

    /// The normalised request.
    pub fn wanted(&self) -> &Wanted {
        &self.wanted
    }

    /// Whether this fitter checks anything for its request: false when
    /// the VM asks for nothing [`Options`] covers, so every host fits.
    pub fn has_work(&self) -> bool {
        let numa = self.options.numa && !self.wanted.cells.is_empty();
        let pci = !self.wanted.pci.is_empty()
            && match self.options.pci {
                PciCheck::Off => false,
                PciCheck::WithNumaTopology => numa,
                PciCheck::Always => true,
            };
        numa || pci || (self.options.mdev && !self.wanted.mdev_types.is_empty())
    }

    /// Fits the VM onto host `host` (an inventory row). On success the
    /// assignment is valid until the next call.
    pub fn fit(&mut self, host: usize) -> Result<&Assignment, Unfit> {
        self.run(host, true)?;
        Ok(&self.assignment)
    }

    /// Whether the VM fits host `host`, and if not why: the same verdict
    /// and reason as [`Fitter::fit`], without laying out the assignment.
    /// A filter needs no more, and skips the CPU layout of the chosen
    /// cells (and, for `prefer` pinning, reading any host's CPUs at all).
    ///
    /// The layout can only fail where a cell's dedicated and pinned
    /// counts disagree with its CPUs' flags, which the host's columns
    /// never do (the counts are derived from the flags).
    pub fn check(&mut self, host: usize) -> Result<(), Unfit> {
        self.run(host, false)
    }

    fn run(&mut self, host: usize, record: bool) -> Result<(), Unfit> {
        self.assignment.clear();
        self.scratch.pci.new_host();
        if let Some(why) = self.wanted.invalid {
            return Err(Unfit::Invalid(why));
        }
        let numa = self.options.numa && !self.wanted.cells.is_empty();
        let pci = !self.wanted.pci.is_empty()
            && match self.options.pci {
                PciCheck::Off => false,
                PciCheck::WithNumaTopology => numa,
                PciCheck::Always => true,
            };
        if numa {
            self.fit_numa(host, pci, record)?;
        } else if pci {
            let scratch = &mut self.scratch.pci;
            pci::fit(
                self.inventory,
                host,
                &self.wanted.pci,
                None,
                scratch,
                &mut self.assignment.pci,
            )?;
        }
        if self.options.mdev && !self.wanted.mdev_types.is_empty() {
            self.fit_mdevs(host)?;
        }
        Ok(())
    }

    fn fit_mdevs(&mut self, host: usize) -> Result<(), Unfit> {
        let offers = self.inventory.mdev_offers();
        let range = offers.host_offers(host);
        let taken = &mut self.scratch.mdev_taken;
        taken.clear();
        taken.resize(range.len(), 0);
        for (request, name) in self.wanted.mdev_types.iter().enumerate() {
            let mut found = None;
            for (local, entry) in range.clone().enumerate() {
                if offers.text(offers.names.get(entry).copied().unwrap_or(NONE)) != name {
                    continue;
                }
                let free = offers.free.get(entry).copied().unwrap_or(0);
                let left = free.saturating_sub(taken[local]);
                if left > 0 && found.is_none() {
                    found = Some(local);
                }
            }
            let Some(local) = found else {
                let wanted = self.wanted.mdev_types.iter().filter(|t| *t == name).count();
                let free = range
                    .clone()
                    .filter(|&e| offers.text(offers.names.get(e).copied().unwrap_or(NONE)) == name)
                    .map(|e| offers.free.get(e).copied().unwrap_or(0))
                    .sum();
                return Err(Unfit::Mdev {
                    request: request as u32,
                    wanted: wanted as u32,
                    free,
                });
            };
            taken[local] += 1;
            self.assignment.mdevs.push(MdevTake {
                request: request as u32,
                entry: (range.start + local) as u32,
            });
        }
        Ok(())
    }

    /// `numa_fit_instance_to_host`: host cells ordered as Nova orders them,
    /// guest cells tried on every permutation in order, each pair's fit
    /// remembered, PCI requests checked per complete placement (once per
    /// set of host cells). With `record`, lays out the assignment of the
    /// placement found.
    fn fit_numa(&mut self, host: usize, pci: bool, record: bool) -> Result<(), Unfit> {
        let inv = self.inventory;
        let topology = inv.numa_topology();
        let cells = topology.host_cells(host);
        let guests = self.wanted.cells.len();
        if cells.is_empty() {
            return Err(Unfit::NoNumaTopology);
        }
        if cells.len() < guests {
            return Err(Unfit::TooFewCells {
                wanted: guests as u32,
                host: cells.len() as u32,
            });
        }
        if cells.len() > 64 {
            return Err(Unfit::Invalid(
                "hosts with more than 64 NUMA cells are not supported",
            ));
        }
        if self.wanted.cpu_policy == CpuPolicy::Dedicated
            && self.wanted.thread_policy == ThreadPolicy::Require
            && !cpus::host_has_threads(inv, cells.clone())
        {
            return Err(Unfit::NoHyperthreads);
        }
        self.scratch.first_cell = cells.start;
        self.order_cells(host, cells.clone());
        self.scratch.cpus.reset(cells.clone());
        let tried = self.scratch.order.len();
        self.scratch.pairs.clear();
        self.scratch.pairs.resize(guests * tried, 0);
        self.scratch.chosen.clear();
        self.scratch.chosen.resize(guests, 0);
        self.scratch.pci_failed.clear();
        let mut failures = Failures::default();
        if !self.search(host, 0, 0, pci, &mut failures) {
            // A PCI failure means some placement of the cells fitted: the
            // devices were what lacked.
            return Err(failures
                .pci
                .or(failures.cell)
                .unwrap_or(Unfit::NoNumaTopology));
        }
        if !record {
            return Ok(());
        }
        // Found: record the assignment of the chosen cells.
        for g in 0..guests {
            let host_cell = self.scratch.chosen[g];
            let reserve = g == 0 && self.wanted.emulator_isolated;
            // Only inconsistent columns (CPU flags against the cell
            // metrics) can fail here.
            if let Err(short) = self.fit_pair(g, host_cell, reserve, true) {
                self.assignment.clear();
                return Err(Unfit::Cell {
                    guest_cell: g as u32,
                    node: self.scratch.cells[host_cell as usize - self.scratch.first_cell].node,
                    short,
                });
            }
        }
        Ok(())
    }

    /// Depth-first over guest cells; the same first success and the same
    /// first failure as Nova's loop over `itertools.permutations`.
    fn search(
        &mut self,
        host: usize,
        depth: usize,
        used: u64,
        pci: bool,
        failures: &mut Failures,
    ) -> bool {
        let guests = self.wanted.cells.len();
        if depth == guests {
            if pci {
                let first = self.scratch.first_cell as u32;
                let set = self
                    .scratch
                    .chosen
                    .iter()
                    .fold(0u64, |set, &c| set | 1 << (c - first));
                if self.scratch.pci_failed.contains(&set) {
                    return false;
                }
                let chosen = std::mem::take(&mut self.scratch.chosen);
                let result = pci::fit(
                    self.inventory,
                    host,
                    &self.wanted.pci,
                    Some(&chosen),
                    &mut self.scratch.pci,
                    &mut self.assignment.pci,
                );
                self.scratch.chosen = chosen;
                if let Err(e) = result {
                    self.assignment.pci.clear();
                    self.scratch.pci_failed.push(set);
                    failures.pci.get_or_insert(e);
                    return false;
                }
            }
            return true;
        }
        let tried = self.scratch.order.len();
        for position in 0..tried {
            if used & (1 << position) != 0 {
                continue;
            }
            let host_cell = self.scratch.order[position];
            let slot = depth * tried + position;
            let state = self.scratch.pairs[slot];
            let fits = match state {
                1 => true,
                2 => false,
                _ => {
                    let reserve = depth == 0 && self.wanted.emulator_isolated;
                    match self.fit_pair(depth, host_cell, reserve, false) {
                        Ok(()) => {
                            self.scratch.pairs[slot] = 1;
                            true
                        }
                        Err(short) => {
                            self.scratch.pairs[slot] = 2;
                            if failures.cell.is_none() {
                                failures.cell = Some(Unfit::Cell {
                                    guest_cell: depth as u32,
                                    node: self.scratch.cells
                                        [host_cell as usize - self.scratch.first_cell]
                                        .node,
                                    short,
                                });
                            }
                            false
                        }
                    }
                }
            };
            if !fits {
                continue;
            }
            self.scratch.chosen[depth] = host_cell;
            if self.search(host, depth + 1, used | (1 << position), pci, failures) {
                return true;
            }
        }
        false
    }

    /// Nova's ordering of host cells when the host has more cells than the
    /// guest: by free memory, then by shared CPU usage (shared guests) or
    /// free dedicated CPUs (pinned guests), then by free PCI devices; each
    /// sort stable, the last one primary.
    fn order_cells(&mut self, host: usize, cells: Range<usize>) {
        let inv = self.inventory;
        // Each cell's figures, read once per host.
        let data = &mut self.scratch.cells;
        data.clear();
        let topology = inv.numa_topology();
        // The columns looked up once per host, not once per cell and
        // metric.
        let [total, free, cpus, dedicated, pinned, used] = [
            CellMetric::MemoryTotalMib,
            CellMetric::MemoryFreeMib,
            CellMetric::Cpus,
            CellMetric::DedicatedCpus,
            CellMetric::PinnedCpus,
            CellMetric::SharedVcpusUsed,
        ]
        .map(|metric| inv.cell_metric(metric));
        let m = |column: &[f64], c: usize| column.get(c).copied().unwrap_or(0.0);
        for c in cells.clone() {
            data.push(CellData {
                node: topology.node_ids.get(c).copied().unwrap_or(c as u32),
                total: m(total, c),
                free: m(free, c),
                cpus: m(cpus, c) as u32,
                dedicated: m(dedicated, c) as u32,
                pinned: m(pinned, c) as u32,
                used: m(used, c),
                pci: 0,
                page_memo: None,
            });
        }
        let order = &mut self.scratch.order;
        order.clear();
        order.extend(cells.clone().map(|c| c as u32));
        if cells.len() <= self.wanted.cells.len() {
            return;
        }
        // Nova sorts by PCI devices whenever the host has PCI stats (always
        // in the filter): cells with more free devices first for a VM with
        // PCI requests, last for one without.
        let pools = inv.pci_pools();
        for p in pools.host_pools(host) {
            let cell = pools.cells.get(p).copied().unwrap_or(NONE) as usize;
            if cells.contains(&cell) {
                data[cell - cells.start].pci += pools.free.get(p).copied().unwrap_or(0);
            }
        }
        // Nova's three stable sorts (free memory; shared vCPUs used, or
        // free dedicated CPUs for pinned guests; free PCI devices), the last
        // one primary, as one sort on the combined key.
        let pack = self.options.pack;
        let pins = self.wanted.pins();
        let with_pci = !self.wanted.pci.is_empty();
        let start = cells.start as u32;
        order.sort_unstable_by(|&a, &b| {
            let (x, y) = (&data[(a - start) as usize], &data[(b - start) as usize]);
            let pci = if with_pci {
                y.pci.cmp(&x.pci)
            } else {
                x.pci.cmp(&y.pci)
            };
            let cpu = if pins {
                let (fx, fy) = (
                    x.dedicated - x.pinned.min(x.dedicated),
                    y.dedicated - y.pinned.min(y.dedicated),
                );
                if pack { fx.cmp(&fy) } else { fy.cmp(&fx) }
            } else if pack {
                y.used.total_cmp(&x.used)
            } else {
                x.used.total_cmp(&y.used)
            };
            let mem = if pack {
                x.free.total_cmp(&y.free)
            } else {
                y.free.total_cmp(&x.free)
            };
            pci.then(cpu).then(mem).then(a.cmp(&b))
        });
    }

    /// `_numa_fit_instance_cell` for guest cell `guest` on host cell
    /// `host_cell` (cluster-wide); with `record`, appends the cell's fit to
    /// the assignment.
    fn fit_pair(
        &mut self,
        guest: usize,
        host_cell: u32,
        reserve: bool,
        record: bool,
    ) -> Result<(), Shortfall> {
        let inv = self.inventory;
        let cell = &self.wanted.cells[guest];
        let c = host_cell as usize;
        let data = self.scratch.cells[c - self.scratch.first_cell];
        let node = data.node;
        if !cell.host_nodes.is_empty() && !cell.host_nodes.contains(&node) {
            return Err(Shortfall::NotInHostNodes);
        }
        let pins = self.wanted.pins();
        let memory_kib = self.memory_kib[guest];

        // Memory and page size.
        let pages = inv.cell_pages();
        let page_range = pages.cell(c);
        let mut page_size_kib = 0u32;
        if self.wanted.page_size != PageSize::Unspecified {
            // Guest cells usually ask for the same memory: the choice is
            // remembered per host cell for the last amount asked.
            let local = c - self.scratch.first_cell;
            let chosen = match data.page_memo {
                Some((kib, result)) if kib == memory_kib => result,
                _ => {
                    let result = choose_page_size(
                        pages,
                        page_range.clone(),
                        self.wanted.page_size,
                        memory_kib,
                    );
                    self.scratch.cells[local].page_memo = Some((memory_kib, result));
                    result
                }
            };
            match chosen {
                Ok(size) => page_size_kib = size,
                Err(largest_free_mib) => {
                    return Err(Shortfall::Pages {
                        page_size: self.wanted.page_size,
                        memory_mib: cell.memory_mib,
                        largest_free_mib,
                    });
                }
            }
        } else if !page_range.is_empty() {
            // The smallest size; free pages for pinned cells, total else.
            let smallest = page_range
                .clone()
                .min_by_key(|&i| pages.size_kib.get(i).copied().unwrap_or(u32::MAX))
                .unwrap_or(page_range.start);
            let size = pages.size_kib.get(smallest).copied().unwrap_or(0);
            let count = if pins {
                pages.free.get(smallest).copied().unwrap_or(0.0)
            } else {
                pages.total.get(smallest).copied().unwrap_or(0.0)
            };
            let avail_kib = count * f64::from(size);
            if size == 0
                || memory_kib as f64 > avail_kib
                || !memory_kib.is_multiple_of(u64::from(size))
            {
                return Err(Shortfall::Memory {
                    wanted_mib: cell.memory_mib,
                    available_mib: avail_kib / 1024.0,
                });
            }
            page_size_kib = size;
        } else if pins {
            let free = data.free;
            if free < cell.memory_mib {
                return Err(Shortfall::Memory {
                    wanted_mib: cell.memory_mib,
                    available_mib: free,
                });
            }
        } else {
            let total = data.total;
            if total < cell.memory_mib {
                return Err(Shortfall::Memory {
                    wanted_mib: cell.memory_mib,
                    available_mib: total,
                });
            }
        }

        let cpus_n = data.cpus;
        let dedicated_n = data.dedicated;
        let pinned_n = data.pinned;
        let shared_n = cpus_n.saturating_sub(dedicated_n);
        let want_pinned = cell.pinned_vcpus.len() as u32 + u32::from(reserve);
        let want_shared = cell.shared_vcpus.len() as u32;
        if pins && want_pinned > dedicated_n {
            return Err(Shortfall::DedicatedCpus {
                wanted: want_pinned,
                cell: dedicated_n,
            });
        }
        if self.wanted.cpu_policy != CpuPolicy::Dedicated && want_shared > shared_n {
            return Err(Shortfall::SharedCpus {
                wanted: want_shared,
                cell: shared_n,
            });
        }
        let pin_start = self.assignment.pinning.len() as u32;
        let claim_start = self.assignment.claimed_cpus.len() as u32;
        if pins {
            let free = dedicated_n.saturating_sub(pinned_n);
            if want_pinned > free {
                return Err(Shortfall::FreeDedicatedCpus {
                    wanted: want_pinned,
                    free,
                });
            }
            // `prefer` always finds a layout when there are enough free
            // dedicated CPUs (it falls back to any free ones), except for
            // an emulator CPU with no vCPU pinned in the cell (Nova reserves
            // nothing then): only the recorded fit needs the layout.
            let prefer_fits = self.wanted.thread_policy == ThreadPolicy::Prefer
                && !(reserve && cell.pinned_vcpus.is_empty());
            if prefer_fits && !record {
                return shared_limits(
                    self.options.limits,
                    self.wanted.cpu_policy,
                    cell,
                    &data,
                    shared_n,
                );
            }
            let view = &mut self.scratch.cpus;
            view.load(inv, c);
            let out = if record {
                Some(&mut self.assignment)
            } else {
                None
            };
            let all_dedicated = dedicated_n == cpus_n;
            if !view.pack(
                &cell.pinned_vcpus,
                self.wanted.thread_policy,
                reserve,
                all_dedicated,
                out,
            ) {
                return Err(Shortfall::ThreadPolicy {
                    policy: self.wanted.thread_policy,
                    wanted: want_pinned,
                    free: view.free_count(),
                    threads_per_core: view.threads_per_core(),
                });
            }
        }
        if let Err(short) = shared_limits(
            self.options.limits,
            self.wanted.cpu_policy,
            cell,
            &data,
            shared_n,
        ) {
            self.assignment.truncate_to(pin_start, claim_start);
            return Err(short);
        }
        if record {
            let pages = if page_size_kib > 0 {
                memory_kib / u64::from(page_size_kib)
            } else {
                0
            };
            let fit = CellFit {
                guest_cell: guest as u32,
                host_cell,
                node,
                shared_vcpus: want_shared,
                pinning: pin_start..self.assignment.pinning.len() as u32,
                claimed: claim_start..self.assignment.claimed_cpus.len() as u32,
                memory_mib: cell.memory_mib,
                page_size_kib,
                pages,
            };
            self.assignment.cells.push(fit);
        }
        Ok(())
    }
}

/// Nova's limits on a guest cell with shared vCPUs: shared vCPUs within
/// `cpu_allocation_ratio` of the cell's shared CPUs, memory within
/// `ram_allocation_ratio` of its total.
fn shared_limits(
    limits: Option<Limits>,
    policy: CpuPolicy,
    cell: &GuestCell,
    data: &CellData,
    shared_n: u32,
) -> Result<(), Shortfall> {
    let Some(limits) = limits else {
        return Ok(());
    };
    if policy == CpuPolicy::Dedicated {
        return Ok(());
    }
    let usage = data.used + cell.shared_vcpus.len() as f64;
    let limit = f64::from(shared_n) * limits.cpu_allocation_ratio;
    if usage > limit {
        return Err(Shortfall::CpuRatio { usage, limit });
    }
    let usage_mib = data.total - data.free + cell.memory_mib;
    let limit_mib = data.total * limits.ram_allocation_ratio;
    if usage_mib > limit_mib {
        return Err(Shortfall::MemoryRatio {
            usage_mib,
            limit_mib,
        });
    }
    Ok(())
}

impl Assignment {
    fn truncate_to(&mut self, pinning: u32, claimed: u32) {
        self.pinning.truncate(pinning as usize);
        self.claimed_cpus.truncate(claimed as usize);
    }
}

fn mib_to_kib(mib: f64) -> u64 {
    if mib <= 0.0 {
        0
    } else {
        (mib * 1024.0).round() as u64
    }
}

/// `_numa_cell_supports_pagesize_request`: the first size, largest first,
/// among those `requested` allows, whose free pages hold `memory_kib`
/// exactly in whole pages. Err: the free memory (MiB) in the largest
/// allowed size, for the reason.
fn choose_page_size(
    pages: &sandpiper_model::CellPages,
    range: Range<usize>,
    requested: PageSize,
    memory_kib: u64,
) -> Result<u32, f64> {
    let size = |i: usize| pages.size_kib.get(i).copied().unwrap_or(0);
    let smallest = range.clone().map(size).min();
    let allowed = |s: u32| match requested {
        PageSize::Unspecified | PageSize::Any => true,
        PageSize::Small => Some(s) == smallest,
        PageSize::Large => Some(s) != smallest,
        PageSize::Kib(k) => s == k,
    };
    let mut best: Option<(u32, f64)> = None;
    let mut largest: Option<(u32, f64)> = None;
    for i in range {
        let s = size(i);
        if s == 0 || !allowed(s) {
            continue;
        }
        let free_kib = pages.free.get(i).copied().unwrap_or(0.0) * f64::from(s);
        if largest.is_none_or(|(l, _)| s > l) {
            largest = Some((s, free_kib));
        }
        let fits = memory_kib as f64 <= free_kib && memory_kib.is_multiple_of(u64::from(s));
        if fits && best.is_none_or(|(b, _)| s > b) {
            best = Some((s, free_kib));
        }
    }
    match best {
        Some((s, _)) => Ok(s),
        None => Err(largest.map_or(0.0, |(_, kib)| kib / 1024.0)),
    }
}

#[cfg(test)]
mod tests;
