//! Unit tests over inventories built directly. Cases named `nova_*` follow
//! the fitting tests of nova/tests/unit/virt/test_hardware.py (named in
//! each test), with Nova's cells written in this crate's terms.

use sandpiper_model::hardware::NONE;
use sandpiper_model::{
    CellCpus, CellMetric, CellPages, CpuPolicy, DeviceKind, EmulatorThreads, Inventory, KeyValue,
    Labels, NumaTopology, PageSize, PciNumaPolicy, PciPools, PciRequest, PcpuFlag, ThreadPolicy,
    Vm, VmHardware, VmNumaCell,
};

use super::*;

/// One host cell for the builder.
#[derive(Clone, Default)]
struct HostCell {
    node: u32,
    socket: Option<u32>,
    memory_mib: f64,
    memory_free_mib: Option<f64>,
    cpus: Vec<u32>,
    dedicated: Vec<u32>,
    pinned: Vec<u32>,
    siblings: Vec<Vec<u32>>,
    shared_used: f64,
    /// (size KiB, total, free)
    pages: Vec<(u32, f64, f64)>,
}

fn cell(node: u32, cpus: &[u32], memory_mib: f64) -> HostCell {
    HostCell {
        node,
        memory_mib,
        cpus: cpus.to_vec(),
        ..HostCell::default()
    }
}

impl HostCell {
    fn dedicated(mut self, d: &[u32]) -> Self {
        self.dedicated = d.to_vec();
        self
    }
    fn all_dedicated(mut self) -> Self {
        self.dedicated = self.cpus.clone();
        self
    }
    fn pinned(mut self, p: &[u32]) -> Self {
        self.pinned = p.to_vec();
        self
    }
    fn siblings(mut self, s: &[&[u32]]) -> Self {
        self.siblings = s.iter().map(|g| g.to_vec()).collect();
        self
    }
    fn free(mut self, f: f64) -> Self {
        self.memory_free_mib = Some(f);
        self
    }
    fn used(mut self, u: f64) -> Self {
        self.shared_used = u;
        self
    }
    fn pages(mut self, p: &[(u32, f64, f64)]) -> Self {
        self.pages = p.to_vec();
        self
    }
    fn socket(mut self, s: u32) -> Self {
        self.socket = Some(s);
        self
    }
}

#[derive(Clone)]
struct Pool {
    vendor: &'static str,
    product: &'static str,
    address: &'static str,
    kind: DeviceKind,
    /// host-local cell position, or None
    cell: Option<usize>,
    /// host-local pool position of the parent
    parent: Option<usize>,
    count: u32,
    free: u32,
    tags: Vec<(&'static str, &'static str)>,
}

fn pool(vendor: &'static str, product: &'static str, cell: Option<usize>, free: u32) -> Pool {
    Pool {
        vendor,
        product,
        address: "",
        kind: DeviceKind::Pci,
        cell,
        parent: None,
        count: free,
        free,
        tags: Vec::new(),
    }
}

#[derive(Clone, Default)]
struct HostSpec {
    cells: Vec<HostCell>,
    pools: Vec<Pool>,
    mdevs: Vec<(&'static str, u32)>,
}

fn host(cells: Vec<HostCell>) -> HostSpec {
    HostSpec {
        cells,
        ..HostSpec::default()
    }
}

fn inventory(hosts: &[HostSpec]) -> Inventory {
    let mut inv = Inventory::new(hosts.len(), 0);
    let mut topo = NumaTopology {
        offsets: vec![0],
        ..NumaTopology::default()
    };
    let mut metrics: [Vec<f64>; 6] = Default::default();
    let mut cpus = CellCpus {
        offsets: vec![0],
        ..CellCpus::default()
    };
    let mut dedicated = Vec::new();
    let mut pinned = Vec::new();
    let mut pages = CellPages {
        offsets: vec![0],
        ..CellPages::default()
    };
    let mut pools = PciPools {
        offsets: vec![0],
        strings: vec![String::new()],
        ..PciPools::default()
    };
    let mut pool_tags: Vec<Vec<(&str, &str)>> = Vec::new();
    let mut mdevs = sandpiper_model::MdevOffers {
        offsets: vec![0],
        ..Default::default()
    };
    let mut core = 0u32;
    for h in hosts {
        let first_cell = topo.node_ids.len();
        for c in &h.cells {
            topo.node_ids.push(c.node);
            topo.sockets.push(c.socket.unwrap_or(NONE));
            metrics[0].push(c.memory_mib);
            metrics[1].push(c.memory_free_mib.unwrap_or(c.memory_mib));
            metrics[2].push(c.cpus.len() as f64);
            metrics[3].push(c.dedicated.len() as f64);
            metrics[4].push(c.pinned.len() as f64);
            metrics[5].push(c.shared_used);
            for &cpu in &c.cpus {
                cpus.cpus.push(cpu);
                let group = c.siblings.iter().position(|g| g.contains(&cpu));
                cpus.cores.push(match group {
                    Some(g) => core + g as u32,
                    None => core + 1000 + cpu,
                });
                dedicated.push(c.dedicated.contains(&cpu));
                pinned.push(c.pinned.contains(&cpu));
            }
            core += 10_000;
            cpus.offsets.push(cpus.cpus.len() as u32);
            for &(size, total, free) in &c.pages {
                pages.size_kib.push(size);
                pages.total.push(total);
                pages.free.push(free);
            }
            pages.offsets.push(pages.size_kib.len() as u32);
        }
        topo.offsets.push(topo.node_ids.len() as u32);
        let first_pool = pools.kinds.len();
        for p in &h.pools {
            let mut intern = |s: &str| {
                if s.is_empty() {
                    return 0;
                }
                pools.strings.push(s.to_owned());
                (pools.strings.len() - 1) as u32
            };
            let v = intern(p.vendor);
            let pr = intern(p.product);
            let a = intern(p.address);
            pools.vendors.push(v);
            pools.products.push(pr);
            pools.addresses.push(a);
            pools.kinds.push(p.kind);
            pools
                .cells
                .push(p.cell.map_or(NONE, |c| (first_cell + c) as u32));
            pools
                .parents
                .push(p.parent.map_or(NONE, |c| (first_pool + c) as u32));
            pools.total.push(p.count);
            pools.free.push(p.free);
            pool_tags.push(p.tags.clone());
        }
        pools.offsets.push(pools.kinds.len() as u32);
        for &(name, free) in &h.mdevs {
            mdevs.strings.push(name.to_owned());
            mdevs.names.push((mdevs.strings.len() - 1) as u32);
            mdevs.free.push(free);
            mdevs.pools.push(NONE);
        }
        mdevs.offsets.push(mdevs.names.len() as u32);
    }
    inv.set_numa_topology(topo).unwrap();
    let names = [
        CellMetric::MemoryTotalMib,
        CellMetric::MemoryFreeMib,
        CellMetric::Cpus,
        CellMetric::DedicatedCpus,
        CellMetric::PinnedCpus,
        CellMetric::SharedVcpusUsed,
    ];
    for (m, column) in names.into_iter().zip(metrics) {
        inv.set_cell_metric(m, column).unwrap();
    }
    inv.set_cell_cpus(cpus).unwrap();
    inv.set_pcpu_flag(PcpuFlag::Dedicated, dedicated).unwrap();
    inv.set_pcpu_flag(PcpuFlag::Pinned, pinned).unwrap();
    inv.set_cell_pages(pages).unwrap();
    inv.set_pci_pools(pools).unwrap();
    inv.set_pci_pool_labels(Labels::from_rows(pool_tags))
        .unwrap();
    inv.set_mdev_offers(mdevs).unwrap();
    inv
}

fn vcell(vcpus: &[u32], memory_mib: f64) -> VmNumaCell {
    VmNumaCell {
        shared_vcpus: vcpus.to_vec(),
        memory_mib,
        ..VmNumaCell::default()
    }
}

fn vm(cells: Vec<VmNumaCell>, policy: CpuPolicy) -> Vm {
    let vcpus = cells
        .iter()
        .map(|c| (c.shared_vcpus.len() + c.dedicated_vcpus.len()) as u32)
        .sum();
    let memory_mib = cells.iter().map(|c| c.memory_mib).sum();
    Vm {
        vcpus,
        memory_mib,
        hardware: VmHardware {
            numa_cells: cells,
            cpu_policy: policy,
            ..VmHardware::default()
        },
        ..Vm::default()
    }
}

/// Fits host 0, and checks that `Fitter::check` gives the same verdict
/// and reason as the fit, so every case below covers both.
fn fit_one(inv: &Inventory, vm: &Vm, options: Options) -> Result<Assignment, Unfit> {
    let fitted = Fitter::new(inv, vm, options).fit(0).cloned();
    let checked = Fitter::new(inv, vm, options).check(0);
    assert_eq!(checked, fitted.as_ref().map(|_| ()).map_err(Clone::clone));
    fitted
}

fn everything() -> Options {
    Options::everything()
}

fn two_by_four() -> HostSpec {
    // test_hardware.py's common host: two cells of 4 CPUs and 2 GiB.
    host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0),
        cell(1, &[4, 5, 6, 7], 2048.0),
    ])
}

#[test]
fn a_vm_without_hardware_needs_fits_any_host() {
    let inv = inventory(&[host(vec![])]);
    let fit = fit_one(&inv, &Vm::default(), everything()).unwrap();
    assert!(fit.cells.is_empty());
    let fitter = Fitter::new(&inv, &Vm::default(), everything());
    assert!(!fitter.has_work());
}

/// NUMATopologyTest.test_host_usage_contiguous / _fit_instance_to_host:
/// two guest cells onto two host cells, in order.
#[test]
fn nova_two_cells_fit_in_order() {
    let inv = inventory(&[two_by_four()]);
    let v = vm(
        vec![vcell(&[0, 1], 1024.0), vcell(&[2, 3], 1024.0)],
        CpuPolicy::Shared,
    );
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(
        fit.cells.iter().map(|c| c.node).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(fit.cells[0].shared_vcpus, 2);
    assert_eq!(fit.cells[0].page_size_kib, 0);
}

/// VirtNUMAHostTopologyTestCase.test_host_numa_fit_instance_to_host_fail:
/// a cell of 3 GiB does not fit cells of 2 GiB.
#[test]
fn nova_cell_too_large_fails_with_figures() {
    let inv = inventory(&[two_by_four()]);
    let v = vm(vec![vcell(&[0, 1], 3072.0)], CpuPolicy::Shared);
    let err = fit_one(&inv, &v, everything()).unwrap_err();
    assert_eq!(
        err,
        Unfit::Cell {
            guest_cell: 0,
            node: 0,
            short: Shortfall::Memory {
                wanted_mib: 3072.0,
                available_mib: 2048.0
            }
        }
    );
    assert_eq!(
        err.to_string(),
        "guest cell 0: host NUMA node 0 has 2048 MiB of memory, 3072 MiB needed"
    );
}

#[test]
fn too_few_cells_and_no_topology_are_reported() {
    let inv = inventory(&[two_by_four(), host(vec![])]);
    let v = vm(
        vec![vcell(&[0], 512.0), vcell(&[1], 512.0), vcell(&[2], 512.0)],
        CpuPolicy::Shared,
    );
    let mut fitter = Fitter::new(&inv, &v, everything());
    assert_eq!(
        fitter.fit(0).unwrap_err(),
        Unfit::TooFewCells { wanted: 3, host: 2 }
    );
    assert_eq!(fitter.fit(1).unwrap_err(), Unfit::NoNumaTopology);
}

/// Spread: with more host cells than guest cells, the cell with more free
/// memory goes first (packing_host_numa_cells_allocation_strategy False,
/// test_hardware.py NUMATopologyTest sorting tests).
#[test]
fn nova_spread_prefers_the_cell_with_more_free_memory() {
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0).free(512.0),
        cell(1, &[4, 5, 6, 7], 2048.0).free(1536.0),
    ])]);
    let v = vm(vec![vcell(&[0], 256.0)], CpuPolicy::Shared);
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cells[0].node, 1);
    let mut packed = everything();
    packed.pack = true;
    assert_eq!(fit_one(&inv, &v, packed).unwrap().cells[0].node, 0);
}

/// CPUPinningCellTestCase.test_get_pinning_inst_too_large_cpu /
/// _mem: pinned cells count free dedicated CPUs and free memory.
#[test]
fn nova_pinning_needs_free_dedicated_cpus() {
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2], 2048.0).all_dedicated().pinned(&[0]),
    ])]);
    let v = vm(vec![vcell(&[0, 1, 2], 1024.0)], CpuPolicy::Dedicated);
    assert_eq!(
        fit_one(&inv, &v, everything()).unwrap_err(),
        Unfit::Cell {
            guest_cell: 0,
            node: 0,
            short: Shortfall::FreeDedicatedCpus { wanted: 3, free: 2 }
        }
    );
    let v = vm(vec![vcell(&[0, 1], 1024.0)], CpuPolicy::Dedicated);
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cell_pinning(0), &[(0, 1), (1, 2)]);
    assert_eq!(fit.cell_claimed_cpus(0), &[1, 2]);
}

/// CPUPinningCellTestCase.test_get_pinning_host_siblings_fit_single_core:
/// prefer packs vCPUs onto the threads of one core first.
#[test]
fn nova_prefer_packs_siblings() {
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3, 4, 5, 6, 7], 4096.0)
            .all_dedicated()
            .siblings(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]),
    ])]);
    let v = vm(vec![vcell(&[0, 1, 2, 3], 2048.0)], CpuPolicy::Dedicated);
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cell_pinning(0), &[(0, 0), (1, 1), (2, 2), (3, 3)]);
}

/// CPUPinningCellTestCase.test_get_pinning_isolate_policy_fits_ht_host:
/// isolate takes one thread per whole free core and claims its siblings.
#[test]
fn nova_isolate_takes_whole_cores() {
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0)
            .all_dedicated()
            .siblings(&[&[0, 1], &[2, 3]]),
    ])]);
    let mut v = vm(vec![vcell(&[0, 1], 1024.0)], CpuPolicy::Dedicated);
    v.hardware.thread_policy = ThreadPolicy::Isolate;
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cell_pinning(0), &[(0, 0), (1, 2)]);
    assert_eq!(fit.cell_claimed_cpus(0), &[0, 1, 2, 3]);
    // test_get_pinning_isolate_policy_no_fully_free_cores
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0)
            .all_dedicated()
            .pinned(&[1, 2])
            .siblings(&[&[0, 1], &[2, 3]]),
    ])]);
    let err = fit_one(&inv, &v, everything()).unwrap_err();
    assert!(matches!(
        err,
        Unfit::Cell {
            short: Shortfall::ThreadPolicy { .. },
            ..
        }
    ));
}

/// CPUPinningCellTestCase.test_get_pinning_require_policy_no_siblings,
/// and NUMATopologyFilter's _satisfies_cpu_policy.
#[test]
fn nova_require_needs_hyperthreads() {
    let inv = inventory(&[host(vec![cell(0, &[0, 1, 2, 3], 2048.0).all_dedicated()])]);
    let mut v = vm(vec![vcell(&[0, 1], 1024.0)], CpuPolicy::Dedicated);
    v.hardware.thread_policy = ThreadPolicy::Require;
    assert_eq!(
        fit_one(&inv, &v, everything()).unwrap_err(),
        Unfit::NoHyperthreads
    );
    // test_get_pinning_require_policy_fits: siblings used two by two.
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0)
            .all_dedicated()
            .siblings(&[&[0, 1], &[2, 3]]),
    ])]);
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cell_pinning(0), &[(0, 0), (1, 1)]);
}

/// CPUPinningCellTestCase.test_get_pinning_host_siblings_fails /
/// prefer's fallback: not enough whole cores, so any free threads.
#[test]
fn nova_prefer_falls_back_to_any_free_threads() {
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3, 4, 5], 2048.0)
            .all_dedicated()
            .pinned(&[1, 3])
            .siblings(&[&[0, 1], &[2, 3], &[4, 5]]),
    ])]);
    let v = vm(vec![vcell(&[0, 1, 2], 1024.0)], CpuPolicy::Dedicated);
    let fit = fit_one(&inv, &v, everything()).unwrap();
    // Free: 0, 2, 4, 5. threads 2: only core (4,5) has 2 free: 2 < 3.
    // threads 1: cores (0), (2), (4,5) -> 0, 2, 4.
    assert_eq!(fit.cell_pinning(0), &[(0, 0), (1, 2), (2, 4)]);
}

/// EmulatorThreadsTestCase.test_single_node_fit / _not_fit: isolate
/// emulator threads take one more dedicated CPU on guest cell 0's cell.
#[test]
fn nova_emulator_threads_isolate_reserves_a_cpu() {
    let inv = inventory(&[host(vec![cell(0, &[0, 1, 2, 3], 2048.0).all_dedicated()])]);
    let mut v = vm(vec![vcell(&[0, 1], 1024.0)], CpuPolicy::Dedicated);
    v.hardware.emulator_threads = EmulatorThreads::Isolate;
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cell_pinning(0), &[(0, 0), (1, 1)]);
    assert_eq!(fit.emulator_cpu, Some(2));
    let v4 = {
        let mut v = vm(vec![vcell(&[0, 1, 2, 3], 1024.0)], CpuPolicy::Dedicated);
        v.hardware.emulator_threads = EmulatorThreads::Isolate;
        v
    };
    assert_eq!(
        fit_one(&inv, &v4, everything()).unwrap_err(),
        Unfit::Cell {
            guest_cell: 0,
            node: 0,
            short: Shortfall::DedicatedCpus { wanted: 5, cell: 4 }
        }
    );
}

/// Implicit topology: dedicated without cells is one cell of every vCPU.
#[test]
fn dedicated_without_cells_is_one_implicit_cell() {
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0).all_dedicated(),
        cell(1, &[4, 5, 6, 7], 2048.0).all_dedicated(),
    ])]);
    let v = Vm {
        vcpus: 3,
        memory_mib: 1024.0,
        hardware: VmHardware {
            cpu_policy: CpuPolicy::Dedicated,
            ..VmHardware::default()
        },
        ..Vm::default()
    };
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cells.len(), 1);
    assert_eq!(fit.cell_pinning(0).len(), 3);
    let v5 = Vm { vcpus: 5, ..v };
    assert!(matches!(
        fit_one(&inv, &v5, everything()).unwrap_err(),
        Unfit::Cell {
            short: Shortfall::DedicatedCpus { wanted: 5, cell: 4 },
            ..
        }
    ));
}

/// NUMATopologyTest.test_host_fit_pagesize / test_cell_accepts_request_*:
/// large pages, largest first; small; explicit size; multiples.
#[test]
fn nova_page_sizes() {
    let pages = [
        (4, 262_144.0, 262_144.0),
        (2048, 512.0, 256.0),
        (1_048_576, 1.0, 1.0),
    ];
    let inv = inventory(&[host(vec![cell(0, &[0, 1], 2048.0).pages(&pages)])]);
    let mut v = vm(vec![vcell(&[0], 512.0)], CpuPolicy::Shared);
    v.hardware.page_size = PageSize::Large;
    let fit = fit_one(&inv, &v, everything()).unwrap();
    // 512 MiB is not a multiple of 1 GiB: 2 MiB pages, 256 of them.
    assert_eq!(
        (fit.cells[0].page_size_kib, fit.cells[0].pages),
        (2048, 256)
    );
    v.hardware.numa_cells[0].memory_mib = 1024.0;
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(
        (fit.cells[0].page_size_kib, fit.cells[0].pages),
        (1_048_576, 1)
    );
    v.hardware.page_size = PageSize::Small;
    assert_eq!(
        fit_one(&inv, &v, everything()).unwrap().cells[0].page_size_kib,
        4
    );
    v.hardware.page_size = PageSize::Kib(2048);
    let err = fit_one(&inv, &v, everything()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "guest cell 0: host NUMA node 0 has no free 2048 KiB pages for 1024 MiB (free: 512 MiB)"
    );
    v.hardware.page_size = PageSize::Kib(16);
    assert!(fit_one(&inv, &v, everything()).is_err());
}

/// _numa_fit_instance_cell without a page size on a host with pages:
/// smallest size, total for shared cells, free for pinned ones.
#[test]
fn nova_no_page_size_uses_the_smallest_pages() {
    let pages = [(4, 262_144.0, 131_072.0)];
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3], 1024.0).all_dedicated().pages(&pages),
    ])]);
    let shared = vm(vec![vcell(&[0], 768.0)], CpuPolicy::Shared);
    // Shared: 768 MiB <= 1024 MiB total (overcommit allowed)... but the
    // cell has no shared CPUs (all dedicated).
    assert!(matches!(
        fit_one(&inv, &shared, everything()).unwrap_err(),
        Unfit::Cell {
            short: Shortfall::SharedCpus { wanted: 1, cell: 0 },
            ..
        }
    ));
    let pinned = vm(vec![vcell(&[0], 768.0)], CpuPolicy::Dedicated);
    assert_eq!(
        fit_one(&inv, &pinned, everything()).unwrap_err(),
        Unfit::Cell {
            guest_cell: 0,
            node: 0,
            short: Shortfall::Memory {
                wanted_mib: 768.0,
                available_mib: 512.0
            }
        }
    );
}

/// NUMATopologyFilter limits: shared vCPUs and memory at allocation ratios.
#[test]
fn nova_limits_on_shared_cells() {
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0).used(7.0).free(1024.0),
    ])]);
    let v = vm(vec![vcell(&[0, 1], 512.0)], CpuPolicy::Shared);
    let limits = Limits {
        cpu_allocation_ratio: 2.0,
        ram_allocation_ratio: 1.0,
    };
    assert_eq!(
        fit_one(&inv, &v, Options::nova_numa_filter(limits)).unwrap_err(),
        Unfit::Cell {
            guest_cell: 0,
            node: 0,
            short: Shortfall::CpuRatio {
                usage: 9.0,
                limit: 8.0
            }
        }
    );
    let limits = Limits {
        cpu_allocation_ratio: 16.0,
        ram_allocation_ratio: 1.2,
    };
    assert!(fit_one(&inv, &v, Options::nova_numa_filter(limits)).is_ok());
}

fn pci_request(count: u32, specs: &[&[(&str, &str)]], policy: PciNumaPolicy) -> PciRequest {
    PciRequest {
        alias: "a".to_owned(),
        count,
        specs: specs
            .iter()
            .map(|s| s.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect())
            .collect(),
        numa_policy: policy,
    }
}

/// PciDeviceStatsTestCase.test_support_requests / _failed.
#[test]
fn nova_pci_support_requests() {
    let mut h = host(vec![]);
    h.pools = vec![pool("v1", "p1", None, 2), pool("v2", "p2", None, 1)];
    let inv = inventory(&[h]);
    let mut v = Vm::default();
    v.hardware.pci_requests = vec![
        pci_request(2, &[&[("vendor_id", "v1")]], PciNumaPolicy::Legacy),
        pci_request(1, &[&[("vendor_id", "V2")]], PciNumaPolicy::Legacy),
    ];
    let fit = fit_one(&inv, &v, Options::nova_pci_filter()).unwrap();
    assert_eq!(
        fit.pci,
        vec![
            PciTake {
                request: 0,
                pool: 0,
                count: 2
            },
            PciTake {
                request: 1,
                pool: 1,
                count: 1
            }
        ]
    );
    v.hardware.pci_requests[0].count = 3;
    assert_eq!(
        fit_one(&inv, &v, Options::nova_pci_filter()).unwrap_err(),
        Unfit::Pci {
            request: 0,
            stage: PciStage::Spec,
            wanted: 3,
            available: 2
        }
    );
}

/// PciDeviceStatsWithTagsTestCase / test_filter_pools_for_unrequested_pfs:
/// tags match case-insensitively; PFs are left out unless asked.
#[test]
fn nova_pci_tags_and_unrequested_pfs() {
    let mut h = host(vec![]);
    let mut tagged = pool("8086", "1520", None, 1);
    tagged.tags = vec![("physical_network", "physnet1")];
    let mut pf = pool("8086", "1528", None, 1);
    pf.kind = DeviceKind::PhysicalFunction;
    pf.address = "0000:81:00.0";
    let mut vf = pool("8086", "1528", None, 4);
    vf.kind = DeviceKind::VirtualFunction;
    vf.parent = Some(1);
    h.pools = vec![tagged, pf, vf];
    let inv = inventory(&[h]);
    let mut v = Vm::default();
    v.hardware.pci_requests = vec![pci_request(
        1,
        &[&[("vendor_id", "8086"), ("physical_network", "PHYSNET1")]],
        PciNumaPolicy::Legacy,
    )];
    assert_eq!(
        fit_one(&inv, &v, Options::nova_pci_filter()).unwrap().pci[0].pool,
        0
    );
    // Product 1528 without dev_type: the PF pool is left out, VFs taken.
    v.hardware.pci_requests = vec![pci_request(
        1,
        &[&[("product_id", "1528")]],
        PciNumaPolicy::Legacy,
    )];
    assert_eq!(
        fit_one(&inv, &v, Options::nova_pci_filter()).unwrap().pci[0].pool,
        2
    );
    // A VF and then the PF: the VF makes its PF unavailable.
    v.hardware.pci_requests = vec![
        pci_request(1, &[&[("dev_type", "type-VF")]], PciNumaPolicy::Legacy),
        pci_request(1, &[&[("dev_type", "type-PF")]], PciNumaPolicy::Legacy),
    ];
    assert!(matches!(
        fit_one(&inv, &v, Options::nova_pci_filter()).unwrap_err(),
        Unfit::Pci {
            request: 1,
            stage: PciStage::Spec,
            ..
        }
    ));
}

/// test_hardware.py NUMATopologyPCITest / PciDeviceStats NUMA tests:
/// legacy takes devices of the chosen cells or without NUMA data; required
/// only of the chosen cells; preferred anything; the guest cell moves to
/// the host cell with the device.
#[test]
fn nova_pci_numa_affinity() {
    let mut h = host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0),
        cell(1, &[4, 5, 6, 7], 2048.0),
    ]);
    h.pools = vec![pool("8086", "1520", Some(1), 1)];
    let inv = inventory(&[h.clone()]);
    let mut v = vm(vec![vcell(&[0], 512.0)], CpuPolicy::Shared);
    v.hardware.pci_requests = vec![pci_request(
        1,
        &[&[("vendor_id", "8086")]],
        PciNumaPolicy::Required,
    )];
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cells[0].node, 1);
    // Two guest cells on two host cells: the device is in one of them.
    let mut v2 = vm(
        vec![vcell(&[0], 512.0), vcell(&[1], 512.0)],
        CpuPolicy::Shared,
    );
    v2.hardware.pci_requests = v.hardware.pci_requests.clone();
    assert!(fit_one(&inv, &v2, everything()).is_ok());
    // The device's cell is too small for the guest cell: required fails,
    // preferred takes it from the other cell.
    let mut small = h.clone();
    small.cells[1].memory_mib = 256.0;
    let inv = inventory(&[small]);
    assert_eq!(
        fit_one(&inv, &v, everything()).unwrap_err(),
        Unfit::Pci {
            request: 0,
            stage: PciStage::Affinity,
            wanted: 1,
            available: 0
        }
    );
    v.hardware.pci_requests[0].numa_policy = PciNumaPolicy::Preferred;
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!((fit.cells[0].node, fit.pci[0].pool), (0, 0));
    // Legacy accepts a device without NUMA data.
    let mut nonuma = h;
    nonuma.pools[0].cell = None;
    let inv = inventory(&[nonuma]);
    v.hardware.pci_requests[0].numa_policy = PciNumaPolicy::Legacy;
    assert!(fit_one(&inv, &v, everything()).is_ok());
    v.hardware.pci_requests[0].numa_policy = PciNumaPolicy::Required;
    assert!(fit_one(&inv, &v, everything()).is_err());
}

/// Two shared guest cells of 512 and 1,024 MiB, and one device of vendor
/// 8086 on one of their host cells (`required` NUMA affinity).
fn two_cells_needing_a_local_8086() -> Vm {
    let mut v = vm(
        vec![vcell(&[0], 512.0), vcell(&[1], 1024.0)],
        CpuPolicy::Shared,
    );
    v.hardware.pci_requests = vec![pci_request(
        1,
        &[&[("vendor_id", "8086")]],
        PciNumaPolicy::Required,
    )];
    v
}

/// Two guest cells over three host cells with the only matching device on
/// the last. Nova orders the cells by free devices of any kind, so the
/// cell with five unmatched devices comes first, and the search meets the
/// set {0, 1} (no device) before {2, 0}: a failed set is remembered, and a
/// set not yet tried is still tried.
#[test]
fn pci_failures_are_remembered_per_set_of_cells_not_per_placement() {
    let mut h = host(vec![
        cell(0, &[0, 1], 2048.0),
        cell(1, &[2, 3], 2048.0),
        cell(2, &[4, 5], 768.0),
    ]);
    h.pools = vec![
        pool("10de", "1db4", Some(0), 5),
        pool("8086", "1520", Some(2), 1),
    ];
    let inv = inventory(&[h.clone()]);
    // Guest cell 1 is too large for host cell 2.
    let v = two_cells_needing_a_local_8086();
    let fit = fit_one(&inv, &v, everything()).unwrap();
    let nodes: Vec<u32> = fit.cells.iter().map(|c| c.node).collect();
    assert_eq!(nodes, [2, 0]);
    assert_eq!(fit.pci.len(), 1);
    // With the device on no cell every set fails (each set twice), with
    // the first placement's reason.
    h.pools[1].cell = None;
    let inv = inventory(&[h]);
    assert_eq!(
        fit_one(&inv, &v, everything()).unwrap_err(),
        Unfit::Pci {
            request: 0,
            stage: PciStage::Affinity,
            wanted: 1,
            available: 0
        }
    );
}

/// A host without enough matching devices gets the PCI shortfall when
/// some placement of the cells fits, and the cells' reason when none does.
#[test]
fn a_host_short_of_devices_fails_on_the_first_placement_or_on_its_cells() {
    let mut h = host(vec![
        cell(0, &[0, 1], 2048.0),
        cell(1, &[2, 3], 2048.0),
        cell(2, &[4, 5], 2048.0),
    ]);
    h.pools = vec![pool("10de", "1db4", Some(0), 5)];
    let inv = inventory(&[h.clone()]);
    let v = two_cells_needing_a_local_8086();
    assert_eq!(
        fit_one(&inv, &v, everything()).unwrap_err(),
        Unfit::Pci {
            request: 0,
            stage: PciStage::Spec,
            wanted: 1,
            available: 0
        }
    );
    for c in &mut h.cells {
        c.memory_mib = 768.0;
    }
    let inv = inventory(&[h]);
    assert!(matches!(
        fit_one(&inv, &v, everything()).unwrap_err(),
        Unfit::Cell { guest_cell: 1, .. }
    ));
}

/// _filter_pools_for_socket_affinity: devices on a cell of the same socket.
#[test]
fn nova_pci_socket_affinity() {
    let mut h = host(vec![
        cell(0, &[0, 1], 2048.0).socket(0),
        cell(1, &[2, 3], 2048.0).socket(0),
        cell(2, &[4, 5], 256.0).socket(1),
    ]);
    h.pools = vec![pool("8086", "1520", Some(1), 1)];
    let mut v = vm(vec![vcell(&[0], 1024.0)], CpuPolicy::Shared);
    v.hardware.pci_requests = vec![pci_request(
        1,
        &[&[("vendor_id", "8086")]],
        PciNumaPolicy::Socket,
    )];
    let inv = inventory(&[h.clone()]);
    // Cell 1 has the device and room: strict affinity already works.
    assert_eq!(fit_one(&inv, &v, everything()).unwrap().cells[0].node, 1);
    h.cells[1].memory_mib = 512.0;
    let inv = inventory(&[h]);
    // Cell 0 is on the device's socket.
    assert_eq!(fit_one(&inv, &v, everything()).unwrap().cells[0].node, 0);
}

#[test]
fn mdevs_are_taken_per_type() {
    let mut h = host(vec![]);
    h.mdevs = vec![("nvidia-35", 1), ("nvidia-36", 2)];
    let inv = inventory(&[h]);
    let mut v = Vm::default();
    v.hardware.mdev_types = vec!["nvidia-36".to_owned(), "nvidia-36".to_owned()];
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.mdevs.len(), 2);
    assert_eq!(fit.mdevs[0].entry, 1);
    v.hardware.mdev_types.push("nvidia-35".to_owned());
    v.hardware.mdev_types.push("nvidia-35".to_owned());
    assert_eq!(
        fit_one(&inv, &v, everything()).unwrap_err(),
        Unfit::Mdev {
            request: 3,
            wanted: 2,
            free: 1
        }
    );
}

/// Mixed policy (test_hardware.py NUMATopologyTest mixed cases): shared
/// vCPUs on shared CPUs, dedicated ones pinned.
#[test]
fn nova_mixed_policy() {
    let inv = inventory(&[host(vec![
        cell(0, &[0, 1, 2, 3], 2048.0).dedicated(&[2, 3]),
    ])]);
    let mut c = vcell(&[0], 512.0);
    c.dedicated_vcpus = vec![1, 2];
    let v = vm(vec![c.clone()], CpuPolicy::Mixed);
    let fit = fit_one(&inv, &v, everything()).unwrap();
    assert_eq!(fit.cell_pinning(0), &[(1, 2), (2, 3)]);
    assert_eq!(fit.cells[0].shared_vcpus, 1);
    c.shared_vcpus = vec![0, 3, 4];
    let v = vm(vec![c], CpuPolicy::Mixed);
    assert!(matches!(
        fit_one(&inv, &v, everything()).unwrap_err(),
        Unfit::Cell {
            short: Shortfall::SharedCpus { wanted: 3, cell: 2 },
            ..
        }
    ));
}

#[test]
fn host_nodes_restrict_guest_cells() {
    let inv = inventory(&[two_by_four()]);
    let mut c = vcell(&[0], 512.0);
    c.host_nodes = vec![1];
    let v = vm(vec![c], CpuPolicy::Shared);
    assert_eq!(fit_one(&inv, &v, everything()).unwrap().cells[0].node, 1);
}

#[test]
fn a_fitter_is_reused_across_hosts() {
    let hosts: Vec<HostSpec> = (0..5)
        .map(|i| {
            host(vec![
                cell(0, &[0, 1, 2, 3], 1024.0 * f64::from(i)).all_dedicated(),
                cell(1, &[4, 5, 6, 7], 1024.0).all_dedicated().pinned(&[4]),
            ])
        })
        .collect();
    let inv = inventory(&hosts);
    let v = vm(
        vec![vcell(&[0, 1], 2048.0), vcell(&[2, 3], 512.0)],
        CpuPolicy::Dedicated,
    );
    let mut fitter = Fitter::new(&inv, &v, everything());
    let fits: Vec<bool> = (0..5).map(|h| fitter.fit(h).is_ok()).collect();
    assert_eq!(fits, vec![false, false, true, true, true]);
    let fit = fitter.fit(4).unwrap();
    assert_eq!(fit.cells[1].host_cell, 9);
    assert_eq!(fit.cell_pinning(1), &[(2, 5), (3, 6)]);
}

/// One host cell of 4096 MiB from CPUPinningCellTestCase, all dedicated.
fn pin_cell(cpus: &[u32], pinned: &[u32], siblings: &[&[u32]]) -> Inventory {
    inventory(&[host(vec![
        cell(0, cpus, 4096.0)
            .all_dedicated()
            .pinned(pinned)
            .siblings(siblings),
    ])])
}

fn pin_vm(vcpus: &[u32], policy: ThreadPolicy) -> Vm {
    let mut c = vcell(&[], 2048.0);
    c.dedicated_vcpus = vcpus.to_vec();
    let mut v = vm(vec![c], CpuPolicy::Dedicated);
    v.hardware.thread_policy = policy;
    v
}

fn pinning_of(inv: &Inventory, v: &Vm) -> Option<Vec<(u32, u32)>> {
    fit_one(inv, v, everything())
        .ok()
        .map(|fit| fit.cell_pinning(0).to_vec())
}

/// CPUPinningCellTestCase: the exact pinnings Nova's tests assert.
#[test]
fn nova_cpu_pinning_cell_cases() {
    let eight: Vec<u32> = (0..8).collect();
    // test_get_pinning_instance_siblings_host_siblings_fits_empty_2
    let inv = pin_cell(&eight, &[], &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]);
    let got = pinning_of(&inv, &pin_vm(&eight, ThreadPolicy::Prefer)).unwrap();
    assert_eq!(got, eight.iter().map(|&x| (x, x)).collect::<Vec<_>>());
    // test_get_pinning_instance_siblings_host_siblings_fits_w_usage
    let inv = pin_cell(&eight, &[1, 2, 5, 6], &[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
    assert_eq!(
        pinning_of(&inv, &pin_vm(&[0, 1, 2, 3], ThreadPolicy::Prefer)).unwrap(),
        vec![(0, 0), (1, 3), (2, 4), (3, 7)]
    );
    // test_get_pinning_host_siblings_fit
    let inv = pin_cell(&[0, 1, 2, 3], &[], &[&[0, 1], &[2, 3]]);
    assert_eq!(
        pinning_of(&inv, &pin_vm(&[0, 1, 2, 3], ThreadPolicy::Prefer)).unwrap(),
        vec![(0, 0), (1, 1), (2, 2), (3, 3)]
    );
    // test_get_pinning_require_policy_no_siblings
    let singles: Vec<Vec<u32>> = eight.iter().map(|&x| vec![x]).collect();
    let singles: Vec<&[u32]> = singles.iter().map(Vec::as_slice).collect();
    let inv = pin_cell(&eight, &[], &singles);
    assert_eq!(
        fit_one(
            &inv,
            &pin_vm(&[0, 1, 2, 3], ThreadPolicy::Require),
            everything()
        )
        .unwrap_err(),
        Unfit::NoHyperthreads
    );
    // test_get_pinning_require_policy_too_few_siblings
    let inv = pin_cell(&eight, &[0, 1, 2], &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]]);
    assert!(pinning_of(&inv, &pin_vm(&[0, 1, 2, 3], ThreadPolicy::Require)).is_none());
    // test_get_pinning_require_policy_fits_w_usage
    let inv = pin_cell(&eight, &[0, 1], &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]]);
    assert_eq!(
        pinning_of(&inv, &pin_vm(&[0, 1, 2, 3], ThreadPolicy::Require)).unwrap(),
        vec![(0, 2), (1, 6), (2, 3), (3, 7)]
    );
    // test_get_pinning_host_siblings_instance_odd_fit
    let inv = pin_cell(&eight, &[], &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]);
    assert_eq!(
        pinning_of(&inv, &pin_vm(&[0, 1, 2, 3, 4], ThreadPolicy::Prefer))
            .unwrap()
            .len(),
        5
    );
    // test_get_pinning_isolate_policy_too_few_fully_free_cores (legacy)
    let inv = pin_cell(&[0, 1, 2, 3], &[1], &[&[0, 1], &[2, 3]]);
    assert!(pinning_of(&inv, &pin_vm(&[0, 1], ThreadPolicy::Isolate)).is_none());
    // test_get_pinning_isolate_policy_fits (legacy, no threads)
    let inv = pin_cell(&[0, 1, 2, 3], &[], &[]);
    assert_eq!(
        pinning_of(&inv, &pin_vm(&[0, 1], ThreadPolicy::Isolate)).unwrap(),
        vec![(0, 0), (1, 1)]
    );
    // test_get_pinning_isolate_policy_fits_w_usage (legacy)
    let inv = pin_cell(&eight, &[0, 1], &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]]);
    let fit = fit_one(&inv, &pin_vm(&[0, 1], ThreadPolicy::Isolate), everything()).unwrap();
    assert_eq!(fit.cell_pinning(0), &[(0, 2), (1, 3)]);
    assert_eq!(fit.cell_claimed_cpus(0), &[2, 6, 3, 7]);
    // test_get_pinning_isolate_policy_bug_1889633: hyperthreads and a
    // shared set: no fit.
    let inv = inventory(&[host(vec![
        cell(0, &eight, 4096.0).dedicated(&[2, 3, 6, 7]).siblings(&[
            &[0, 4],
            &[1, 5],
            &[2, 6],
            &[3, 7],
        ]),
    ])]);
    assert!(matches!(
        fit_one(&inv, &pin_vm(&[0, 1], ThreadPolicy::Isolate), everything()).unwrap_err(),
        Unfit::Cell {
            short: Shortfall::ThreadPolicy {
                policy: ThreadPolicy::Isolate,
                ..
            },
            ..
        }
    ));
    // test_get_pinning_mixed_policy_bug_1898272: no shared CPUs.
    let inv = pin_cell(&[0, 1, 2, 3], &[], &[&[0, 2], &[1, 3]]);
    let mut c = vcell(&[0], 2048.0);
    c.dedicated_vcpus = vec![1, 2, 3];
    assert!(matches!(
        fit_one(&inv, &vm(vec![c], CpuPolicy::Mixed), everything()).unwrap_err(),
        Unfit::Cell {
            short: Shortfall::SharedCpus { wanted: 1, cell: 0 },
            ..
        }
    ));
}
