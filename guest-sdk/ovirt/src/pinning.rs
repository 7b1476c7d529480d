//! oVirt's CPU pinning: the VM's pinning policy (`CpuPinningPolicy`), its
//! manual pinning string (`CpuPinningHelper`), a host's CPUs as oVirt's
//! `VdsCpuUnit`s, and the exclusive allocation of `VdsCpuUnitPinningHelper`
//! (`updatePhysicalCpuAllocations`) that `CpuPinning` filters with and
//! `CPU for high performance VMs` weighs by.
//!
//! Encodings (docs/units.md, "oVirt data conventions"):
//! * the policy is the extra spec `ovirt:cpu_pinning_policy` (`none`,
//!   `manual`, `resize_and_pin_numa`, `dedicated`, `isolate_threads`) when
//!   set, else the VM's hardware `cpu_policy`: `dedicated` is oVirt's
//!   `DEDICATED`, or `ISOLATE_THREADS` with `thread_policy` `isolate`;
//!   `shared` is `NONE` (or `MANUAL` when a pinning string is set);
//!   `mixed` has no oVirt equivalent and is refused;
//! * the manual pinning string (`VM.getVmPinning()`, `0#1,2_1#3-5`) is the
//!   extra spec `ovirt:cpu_pinning`;
//! * a host's CPUs are its NUMA cells' `cpus`; those flagged `dedicated`
//!   may be pinned exclusively (oVirt has no split: an oVirt host lists
//!   every online CPU as dedicated), those flagged `pinned` are already
//!   exclusively pinned (pending placements included); a CPU's socket is
//!   its cell's, its core the `cores` entry.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use sandpiper_guest::Inventory;
use sandpiper_guest::float;
use sandpiper_guest::model::hardware::{
    CellCpus, CellMetric, CpuPolicy, NONE, NumaTopology, PcpuFlag, ThreadPolicy,
};
use sandpiper_guest::prelude::*;

/// The VM extra spec carrying oVirt's CPU pinning policy.
pub const PINNING_POLICY_SPEC: &str = "ovirt:cpu_pinning_policy";
/// The VM extra spec carrying oVirt's manual CPU pinning string.
pub const CPU_PINNING_SPEC: &str = "ovirt:cpu_pinning";
/// The prefix both specs share, for `applies_to`.
pub const CPU_PINNING_PREFIX: &str = "ovirt:cpu_pinning";

/// oVirt's `CpuPinningPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinningPolicy {
    None,
    Manual,
    ResizeAndPinNuma,
    Dedicated,
    IsolateThreads,
}

impl PinningPolicy {
    /// The VM's policy; `Err` with a sentence when it names none of oVirt's.
    pub fn of(vm: &Vm) -> Result<PinningPolicy, String> {
        if let Some(value) = extra_spec(vm, PINNING_POLICY_SPEC) {
            return match value.trim() {
                "" | "none" => Ok(PinningPolicy::None),
                "manual" => Ok(PinningPolicy::Manual),
                "resize_and_pin_numa" => Ok(PinningPolicy::ResizeAndPinNuma),
                "dedicated" => Ok(PinningPolicy::Dedicated),
                "isolate_threads" => Ok(PinningPolicy::IsolateThreads),
                other => Err(format!(
                    "unknown CPU pinning policy {other:?} in {PINNING_POLICY_SPEC}"
                )),
            };
        }
        let hardware = &vm.hardware;
        match hardware.cpu_policy {
            // A pinning string without a policy is oVirt's manual pinning.
            CpuPolicy::Shared
                if extra_spec(vm, CPU_PINNING_SPEC).is_some_and(|text| !text.trim().is_empty()) =>
            {
                Ok(PinningPolicy::Manual)
            }
            CpuPolicy::Shared => Ok(PinningPolicy::None),
            CpuPolicy::Dedicated if hardware.thread_policy == ThreadPolicy::Isolate => {
                Ok(PinningPolicy::IsolateThreads)
            }
            CpuPolicy::Dedicated => Ok(PinningPolicy::Dedicated),
            CpuPolicy::Mixed => {
                Err("CPU policy mixed has no oVirt equivalent (dedicated or shared)".to_owned())
            }
        }
    }

    /// oVirt's `isExclusive`: the host CPUs are the VM's alone.
    pub fn is_exclusive(self) -> bool {
        matches!(
            self,
            PinningPolicy::Dedicated | PinningPolicy::IsolateThreads
        )
    }
}

/// The value of the VM's extra spec `key`, if set.
pub fn extra_spec<'a>(vm: &'a Vm, key: &str) -> Option<&'a str> {
    vm.extra_specs
        .iter()
        .find(|spec| spec.key == key)
        .map(|spec| spec.value.as_str())
}

/// The VM's manual pinning (`ovirt:cpu_pinning`), vCPU → host CPUs;
/// empty when unset. `Err` names a malformed rule.
pub fn manual_pinning(vm: &Vm) -> Result<BTreeMap<u32, BTreeSet<u32>>, String> {
    match extra_spec(vm, CPU_PINNING_SPEC) {
        None => Ok(BTreeMap::new()),
        Some(text) => parse_pinning(text),
    }
}

/// Parses oVirt's pinning string `vcpu#cpus_vcpu#cpus`, where `cpus` is a
/// comma list of numbers, ranges `a-b` and exclusions `^n`
/// (`CpuPinningHelper.parseCpuPinning`).
pub fn parse_pinning(text: &str) -> Result<BTreeMap<u32, BTreeSet<u32>>, String> {
    let text = text.trim();
    let mut pinning = BTreeMap::new();
    if text.is_empty() {
        return Ok(pinning);
    }
    let bad = |rule: &str| format!("malformed CPU pinning rule {rule:?} in {CPU_PINNING_SPEC}");
    for rule in text.split('_') {
        let (vcpu, cpus) = rule.split_once('#').ok_or_else(|| bad(rule))?;
        let vcpu: u32 = vcpu.trim().parse().map_err(|_| bad(rule))?;
        let mut include = BTreeSet::new();
        let mut exclude = BTreeSet::new();
        for section in cpus.split(',') {
            let section = section.trim();
            if let Some(excluded) = section.strip_prefix('^') {
                exclude.insert(excluded.parse::<u32>().map_err(|_| bad(rule))?);
            } else if let Some((start, end)) = section.split_once('-') {
                let start: u32 = start.parse().map_err(|_| bad(rule))?;
                let end: u32 = end.parse().map_err(|_| bad(rule))?;
                if start >= end {
                    return Err(bad(rule));
                }
                include.extend(start..=end);
            } else {
                include.insert(section.parse::<u32>().map_err(|_| bad(rule))?);
            }
        }
        let cpus: BTreeSet<u32> = include.difference(&exclude).copied().collect();
        pinning
            .entry(vcpu)
            .or_insert_with(BTreeSet::new)
            .extend(cpus);
    }
    Ok(pinning)
}

/// One host CPU, as oVirt's `VdsCpuUnit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuUnit {
    /// The CPU's number on its host.
    pub cpu: u32,
    /// Its core, unique on the host.
    pub core: u32,
    /// Its socket (its cell's), `NONE` when not reported.
    pub socket: u32,
    /// Its cell, cluster-wide index.
    pub cell: usize,
    /// May be pinned exclusively.
    pub dedicated: bool,
    /// Pinned exclusively by a VM (pending placements included).
    pub pinned: bool,
}

/// Hosts' CPUs as oVirt's `VdsCpuUnit`s, read host after host into one
/// buffer: a unit reads them for every candidate.
pub struct HostCpus<'a> {
    topology: &'a NumaTopology,
    cpus: &'a CellCpus,
    dedicated: &'a [bool],
    pinned: &'a [bool],
    units: Vec<CpuUnit>,
}

impl<'a> HostCpus<'a> {
    pub fn new(inventory: &'a Inventory) -> Self {
        HostCpus {
            topology: inventory.numa_topology(),
            cpus: inventory.cell_cpus(),
            dedicated: inventory.pcpu_flag(PcpuFlag::Dedicated),
            pinned: inventory.pcpu_flag(PcpuFlag::Pinned),
            units: Vec::new(),
        }
    }

    /// Every CPU of host `host`'s NUMA cells, in cell order; empty when
    /// the host reports no cells or no CPUs (oVirt's "no CPU topology").
    pub fn of(&mut self, host: u32) -> &[CpuUnit] {
        let cpus = self.iter(host);
        self.units.clear();
        cpus.for_each(|cpu| self.units.push(cpu));
        &self.units
    }

    /// [`HostCpus::of`] read from the columns as it is walked, for a
    /// caller that keeps only some of the CPUs (the allocation keeps the
    /// dedicated ones) or asks whether there are any.
    pub fn iter(&self, host: u32) -> impl Iterator<Item = CpuUnit> + 'a {
        let (topology, cpus) = (self.topology, self.cpus);
        let (dedicated, pinned) = (self.dedicated, self.pinned);
        topology.host_cells(host as usize).flat_map(move |cell| {
            let socket = topology.sockets.get(cell).copied().unwrap_or(NONE);
            cpus.cell(cell).filter_map(move |entry| {
                Some(CpuUnit {
                    cpu: *cpus.cpus.get(entry)?,
                    core: *cpus.cores.get(entry)?,
                    socket,
                    cell,
                    dedicated: dedicated.get(entry).copied().unwrap_or(false),
                    pinned: pinned.get(entry).copied().unwrap_or(false),
                })
            })
        })
    }
}

/// The VM's virtual topology as oVirt's allocation reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmTopology {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
}

impl VmTopology {
    /// The VM's sockets, cores per socket and threads per core (0 read as 1).
    pub fn of(vm: &Vm) -> Self {
        VmTopology {
            sockets: vm.cpu_sockets.max(1),
            cores_per_socket: vm.cpu_cores_per_socket.max(1),
            threads_per_core: vm.cpu_threads_per_core.max(1),
        }
    }

    /// oVirt's `getNumOfCpus`: sockets × cores × threads.
    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }
}

/// What the exclusive allocation needs of the VM's vNUMA cells: the
/// memory of its first cell (oVirt assumes all cells are equal) and how
/// many cells there are. `None` without vNUMA.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VnumaNeed {
    pub first_cell_mib: f64,
    pub cells: u32,
}

impl VnumaNeed {
    pub fn of(vm: &Vm) -> Option<Self> {
        let cells = &vm.hardware.numa_cells;
        cells.first().map(|first| VnumaNeed {
            first_cell_mib: first.memory_mib,
            cells: cells.len() as u32,
        })
    }
}

/// oVirt's exclusive allocation (`updatePhysicalCpuAllocations` for a
/// `DEDICATED` or `ISOLATE_THREADS` VM), run host after host with the same
/// working buffers: a unit runs it for every candidate, and building the
/// working copy, the cores and the result afresh per host cost it a
/// third of its sandboxed time (docs/unit-costs.md, session 51).
#[derive(Default)]
pub struct ExclusiveAllocator {
    /// The host's dedicated CPUs (of sockets with room for the vNUMA cells).
    units: Vec<Unit>,
    cores: Cores,
    /// Per socket kept with vNUMA: its cells' free memory.
    socket_cells: Vec<(u32, f64)>,
    /// The (socket, cell) pairs whose memory is counted already.
    cells_seen: Vec<(u32, usize)>,
    /// Indices into `units`, in the order taken.
    taken: Vec<usize>,
    pinned: Vec<CpuUnit>,
}

impl ExclusiveAllocator {
    pub fn new() -> Self {
        Self::default()
    }

    /// The host CPUs the VM would be pinned to on a host with CPUs `cpus`,
    /// `None` when it cannot. Only dedicated, unpinned CPUs are taken.
    /// With vNUMA, sockets whose cells' free memory is below the VM's
    /// first cell are left out, and a socket takes as many virtual sockets
    /// as its free memory holds cells
    /// (`filterSocketsWithInsufficientMemoryForNumaNode`,
    /// `getVirtualNumaNodesInSocket`).
    pub fn allocate(
        &mut self,
        cpus: impl IntoIterator<Item = CpuUnit>,
        policy: PinningPolicy,
        topology: VmTopology,
        vnuma: Option<VnumaNeed>,
        cell_free_mib: &[f64],
    ) -> Option<&[CpuUnit]> {
        // oVirt's topology holds every online CPU; ours may mark some
        // shared only.
        let units = &mut self.units;
        units.clear();
        // `for_each`, not `extend`: it walks a `HostCpus::iter` as nested
        // loops, where `extend` steps the flattened iterator one at a time.
        cpus.into_iter()
            .filter(|cpu| cpu.dedicated)
            .for_each(|cpu| {
                units.push(Unit {
                    cpu,
                    taken: cpu.pinned,
                })
            });
        if units.is_empty() {
            return None;
        }
        self.socket_cells.clear();
        if let Some(need) = vnuma {
            // Each socket's cells' free memory, in one pass; a cell's CPUs
            // usually come together, so the previous CPU's is tried first.
            self.cells_seen.clear();
            let mut previous = None;
            for unit in units.iter() {
                let key = (unit.cpu.socket, unit.cpu.cell);
                if previous == Some(key) || self.cells_seen.contains(&key) {
                    previous = Some(key);
                    continue;
                }
                previous = Some(key);
                self.cells_seen.push(key);
                let (socket, cell) = key;
                let at = match self.socket_cells.iter().position(|&(s, _)| s == socket) {
                    Some(at) => at,
                    None => {
                        self.socket_cells.push((socket, 0.0));
                        self.socket_cells.len() - 1
                    }
                };
                let free = cell_free_mib.get(cell).copied().unwrap_or(0.0);
                self.socket_cells[at].1 += float::max(free, 0.0);
            }
            // Sockets whose cells cannot hold one vNUMA cell are dropped.
            let short = |free: f64| free < need.first_cell_mib;
            if self.socket_cells.iter().any(|&(_, free)| short(free)) {
                let cells = &self.socket_cells;
                units.retain(|u| {
                    !cells
                        .iter()
                        .any(|&(s, free)| s == u.cpu.socket && short(free))
                });
                self.socket_cells.retain(|&(_, free)| !short(free));
            }
            if units.is_empty() {
                return None;
            }
        }
        self.cores.group(units);
        let mut pass = Pass {
            units,
            cores: &self.cores,
            taken: &mut self.taken,
            topology,
            vnuma,
            socket_cells: &self.socket_cells,
        };
        let fits = match policy {
            PinningPolicy::Dedicated => pass.dedicated() == topology.cpus() as usize,
            PinningPolicy::IsolateThreads => pass.isolated() == topology.cpus(),
            _ => return None,
        };
        if !fits {
            return None;
        }
        self.pinned.clear();
        self.pinned
            .extend(self.taken.iter().map(|&i| self.units[i].cpu));
        Some(&self.pinned)
    }
}

/// A CPU in the allocation's working copy.
#[derive(Clone, Copy)]
struct Unit {
    cpu: CpuUnit,
    taken: bool,
}

/// The allocation's CPUs grouped by physical core, once per host: each
/// socket's pass then walks its cores' members instead of rescanning
/// every CPU of the host per core (and collecting a list per core).
#[derive(Default)]
struct Cores {
    /// (socket, core, unit index), sorted: each core's members together.
    sorted: Vec<(u32, u32, u32)>,
    /// Unit indices in `sorted`'s order.
    members: Vec<usize>,
    /// Per core, in the order the host lists them: its socket and its
    /// members' range in `members`.
    cores: Vec<(u32, Range<usize>)>,
    /// The sockets, in the order the host lists them.
    sockets: Vec<u32>,
}

impl Cores {
    fn group(&mut self, units: &[Unit]) {
        // Sorting the keys themselves, not indices looked up per
        // comparison: in the sandbox each lookup is a bounds check and a
        // load.
        self.sorted.clear();
        self.sorted.extend(
            (0u32..)
                .zip(units)
                .map(|(i, u)| (u.cpu.socket, u.cpu.core, i)),
        );
        self.sorted.sort_unstable();
        self.members.clear();
        self.members
            .extend(self.sorted.iter().map(|&(_, _, i)| i as usize));
        self.cores.clear();
        let mut start = 0;
        for core in self.sorted.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            self.cores.push((core[0].0, start..start + core.len()));
            start += core.len();
        }
        // A core's first member is where the host first lists it.
        let members = &self.members;
        self.cores
            .sort_unstable_by_key(|(_, range)| members[range.start]);
        self.sockets.clear();
        for &(socket, _) in &self.cores {
            if !self.sockets.contains(&socket) {
                self.sockets.push(socket);
            }
        }
    }

    /// Socket `socket`'s cores' members, cores in host order.
    fn in_socket(&self, socket: u32) -> impl Iterator<Item = &[usize]> {
        self.cores
            .iter()
            .filter(move |(s, _)| *s == socket)
            .map(|(_, range)| &self.members[range.clone()])
    }
}

/// One host's allocation: its working copy and what the VM asks.
struct Pass<'a> {
    units: &'a mut [Unit],
    cores: &'a Cores,
    /// Indices into `units`, in the order taken.
    taken: &'a mut Vec<usize>,
    topology: VmTopology,
    vnuma: Option<VnumaNeed>,
    socket_cells: &'a [(u32, f64)],
}

impl Pass<'_> {
    /// oVirt's `getMaxFreedSocket`: the socket with the most free CPUs,
    /// the first on a tie (and the first socket when none has any).
    fn max_free_socket(&self) -> u32 {
        let sockets = &self.cores.sockets;
        let mut chosen = sockets[0];
        let mut best = 0;
        for &socket in sockets {
            let free = self
                .units
                .iter()
                .filter(|u| u.cpu.socket == socket && !u.taken)
                .count();
            if free > best {
                best = free;
                chosen = socket;
            }
        }
        chosen
    }

    /// How many virtual sockets one physical socket may take with vNUMA
    /// (`amountOfVSocketsInPSockets`); unlimited without.
    fn vsockets_in_socket(&self, socket: u32) -> u32 {
        let Some(need) = self.vnuma else {
            return u32::MAX;
        };
        let free = self
            .socket_cells
            .iter()
            .find(|(s, _)| *s == socket)
            .map_or(0.0, |(_, free)| *free);
        let cells_fitting = if need.first_cell_mib > 0.0 {
            float::min((free / need.first_cell_mib).floor(), f64::from(u32::MAX)) as u32
        } else {
            u32::MAX
        };
        let cells_per_vsocket = need.cells.div_ceil(self.topology.sockets).max(1);
        cells_fitting / cells_per_vsocket
    }

    /// The walk both of oVirt's policies share: sockets most free first,
    /// each tried once, until every virtual socket is placed. `fill` takes
    /// what it can of one socket within its vNUMA limit (virtual sockets),
    /// gives back the cores that do not complete a virtual socket, and
    /// returns how many cores it filled. False, with nothing taken, when a
    /// virtual socket is left without room.
    fn by_socket(&mut self, mut fill: impl FnMut(&mut Self, u32, u32) -> u32) -> bool {
        self.taken.clear();
        let per_socket = self.topology.cores_per_socket;
        let mut sockets_left = self.topology.sockets;
        for _ in 0..self.cores.sockets.len() {
            if sockets_left == 0 {
                break;
            }
            let socket = self.max_free_socket();
            let limit = self.vsockets_in_socket(socket);
            let cores = fill(self, socket, limit);
            sockets_left = sockets_left.saturating_sub(cores / per_socket);
        }
        if sockets_left > 0 {
            self.taken.clear();
        }
        sockets_left == 0
    }

    /// `allocateDedicatedCpus`: whole virtual cores on free threads of one
    /// physical core, socket by socket, most free socket first; a socket's
    /// cores that do not complete a virtual socket are given back. Returns
    /// how many CPUs it took (none unless every virtual socket is placed).
    fn dedicated(&mut self) -> usize {
        let topology = self.topology;
        let wanted = topology.cpus() as usize;
        let threads = topology.threads_per_core as usize;
        let per_socket = topology.cores_per_socket;
        self.by_socket(|pass, socket, limit| {
            let (cores, units, taken) = (pass.cores, &mut *pass.units, &mut *pass.taken);
            let mut core_count: u32 = 0;
            for members in cores.in_socket(socket) {
                // Past these, no later core takes anything.
                if taken.len() >= wanted || core_count / per_socket >= limit {
                    break;
                }
                let mut core_threads = members.iter().filter(|&&i| !units[i].taken).count();
                // The core's free threads, taken in host order.
                let mut free = members.iter().copied();
                while core_threads >= threads
                    && taken.len() < wanted
                    && core_count / per_socket < limit
                {
                    let mut thread = 0;
                    while thread < threads && taken.len() < wanted {
                        let Some(i) = free.find(|&i| !units[i].taken) else {
                            break;
                        };
                        units[i].taken = true;
                        taken.push(i);
                        thread += 1;
                    }
                    core_count += 1;
                    core_threads -= threads;
                }
            }
            let remainder = (core_count % per_socket) as usize;
            for _ in 0..remainder * threads {
                if let Some(i) = taken.pop() {
                    units[i].taken = false;
                }
            }
            core_count
        });
        self.taken.len()
    }

    /// `allocateIsolatedThreadsCpus`: one vCPU per whole free physical
    /// core (all its threads taken), socket by socket. Returns how many
    /// vCPUs it placed (none unless every virtual socket is placed).
    fn isolated(&mut self) -> u32 {
        let topology = self.topology;
        let wanted = topology.cpus();
        let per_socket = topology.cores_per_socket;
        let threads = topology.threads_per_core;
        let mut vcpus: u32 = 0;
        let placed = self.by_socket(|pass, socket, limit| {
            let (cores, units, taken) = (pass.cores, &mut *pass.units, &mut *pass.taken);
            let mut core_count: u32 = 0;
            for in_core in cores.in_socket(socket) {
                // Past these, no later core takes anything.
                if vcpus >= wanted || core_count / per_socket >= limit {
                    break;
                }
                if in_core.iter().any(|&i| units[i].taken) {
                    continue;
                }
                for &i in in_core {
                    units[i].taken = true;
                    taken.push(i);
                }
                vcpus += 1;
                if vcpus.is_multiple_of(threads) {
                    core_count += 1;
                }
            }
            for _ in 0..core_count % per_socket {
                // Give back the last core taken, all its threads.
                if let Some(&last) = taken.last() {
                    let (socket, core) = (units[last].cpu.socket, units[last].cpu.core);
                    taken.retain(|&i| {
                        let same = units[i].cpu.socket == socket && units[i].cpu.core == core;
                        if same {
                            units[i].taken = false;
                        }
                        !same
                    });
                    vcpus = vcpus.saturating_sub(1);
                }
            }
            core_count
        });
        if placed { vcpus } else { 0 }
    }
}

/// Each cell's free memory, MiB (cluster-wide cell index).
pub fn cell_free_mib(inventory: &Inventory) -> &[f64] {
    inventory.cell_metric(CellMetric::MemoryFreeMib)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(cpu: u32, core: u32, socket: u32, cell: usize) -> CpuUnit {
        CpuUnit {
            cpu,
            core,
            socket,
            cell,
            dedicated: true,
            pinned: false,
        }
    }

    /// 2 sockets × 2 cores × 2 threads, one cell per socket.
    fn host() -> Vec<CpuUnit> {
        vec![
            unit(0, 0, 0, 0),
            unit(1, 0, 0, 0),
            unit(2, 1, 0, 0),
            unit(3, 1, 0, 0),
            unit(4, 2, 1, 1),
            unit(5, 2, 1, 1),
            unit(6, 3, 1, 1),
            unit(7, 3, 1, 1),
        ]
    }

    /// One host's allocation with fresh buffers.
    fn allocate_exclusive(
        cpus: &[CpuUnit],
        policy: PinningPolicy,
        topology: VmTopology,
        vnuma: Option<VnumaNeed>,
        cell_free_mib: &[f64],
    ) -> Option<Vec<CpuUnit>> {
        ExclusiveAllocator::new()
            .allocate(cpus.iter().copied(), policy, topology, vnuma, cell_free_mib)
            .map(<[CpuUnit]>::to_vec)
    }

    fn topology(sockets: u32, cores: u32, threads: u32) -> VmTopology {
        VmTopology {
            sockets,
            cores_per_socket: cores,
            threads_per_core: threads,
        }
    }

    #[test]
    fn parses_ovirt_pinning_strings() {
        let pinning = parse_pinning("0#1,2_1#3-5,^4").unwrap();
        assert_eq!(pinning[&0], BTreeSet::from([1, 2]));
        assert_eq!(pinning[&1], BTreeSet::from([3, 5]));
        assert!(parse_pinning("0#").is_err());
        assert!(parse_pinning("x#1").is_err());
        assert!(parse_pinning("0#5-3").is_err());
        assert!(parse_pinning("").unwrap().is_empty());
    }

    #[test]
    fn dedicated_fills_the_freest_socket_first() {
        let got = allocate_exclusive(
            &host(),
            PinningPolicy::Dedicated,
            topology(1, 2, 2),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(got.iter().map(|u| u.cpu).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    #[test]
    fn siblings_listed_apart_are_still_one_core() {
        // Linux numbers a core's threads a socket apart: 0 and 2 share core 0.
        let cpus = [
            unit(0, 0, 0, 0),
            unit(1, 1, 0, 0),
            unit(2, 0, 0, 0),
            unit(3, 1, 0, 0),
        ];
        let cpu_ids = |got: Option<Vec<CpuUnit>>| {
            got.map(|got| got.iter().map(|u| u.cpu).collect::<Vec<_>>())
        };
        let dedicated = allocate_exclusive(
            &cpus,
            PinningPolicy::Dedicated,
            topology(1, 1, 2),
            None,
            &[],
        );
        assert_eq!(cpu_ids(dedicated), Some(vec![0, 2]));
        let isolated = allocate_exclusive(
            &cpus,
            PinningPolicy::IsolateThreads,
            topology(1, 2, 1),
            None,
            &[],
        );
        assert_eq!(cpu_ids(isolated), Some(vec![0, 2, 1, 3]));
    }

    #[test]
    fn dedicated_needs_whole_virtual_sockets() {
        let mut cpus = host();
        cpus[0].pinned = true;
        cpus[4].pinned = true;
        // Each socket has one whole free core left: no socket holds 2 cores.
        assert!(
            allocate_exclusive(
                &cpus,
                PinningPolicy::Dedicated,
                topology(1, 2, 2),
                None,
                &[]
            )
            .is_none()
        );
        // One core of two threads still fits.
        assert!(
            allocate_exclusive(
                &cpus,
                PinningPolicy::Dedicated,
                topology(1, 1, 2),
                None,
                &[]
            )
            .is_some()
        );
    }

    #[test]
    fn isolate_threads_takes_whole_cores() {
        let got = allocate_exclusive(
            &host(),
            PinningPolicy::IsolateThreads,
            topology(1, 2, 1),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(got.len(), 4, "two vCPUs, each with a whole 2-thread core");
        assert!(
            allocate_exclusive(
                &host(),
                PinningPolicy::IsolateThreads,
                topology(1, 5, 1),
                None,
                &[]
            )
            .is_none()
        );
    }

    #[test]
    fn shared_only_cpus_are_never_pinned() {
        let mut cpus = host();
        for cpu in &mut cpus {
            cpu.dedicated = false;
        }
        assert!(
            allocate_exclusive(
                &cpus,
                PinningPolicy::Dedicated,
                topology(1, 1, 1),
                None,
                &[]
            )
            .is_none()
        );
    }

    #[test]
    fn vnuma_memory_rules_sockets_out() {
        let need = Some(VnumaNeed {
            first_cell_mib: 4096.0,
            cells: 1,
        });
        let got = allocate_exclusive(
            &host(),
            PinningPolicy::Dedicated,
            topology(1, 1, 1),
            need,
            &[1024.0, 8192.0],
        )
        .unwrap();
        assert_eq!(got[0].socket, 1, "socket 0's cell has too little memory");
    }
}
