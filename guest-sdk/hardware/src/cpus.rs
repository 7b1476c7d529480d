//! Pinning vCPUs onto a host cell's free dedicated CPUs: Nova's
//! `_pack_instance_onto_cores` (nova/virt/hardware.py), over one cell's
//! `cell-cpus` rows and the `dedicated`/`pinned` flags, in reused buffers.

use std::ops::Range;

use sandpiper_model::inventory::Fetch;
use sandpiper_model::{Inventory, PcpuFlag, ThreadPolicy};

use crate::Assignment;

/// One core of a cell: its threads, and its free dedicated ones.
#[derive(Clone, Copy, Debug, Default)]
struct Group {
    /// The core's lowest CPU: groups are taken in this order.
    min_cpu: u32,
    /// Threads of the core in the cell (Nova's sibling set).
    size: u32,
    /// Its entries in `CellView::entries`, while the cell is loaded.
    entries: u32,
    /// Its free dedicated CPUs in the cell's part of `CellView::free`,
    /// relative to the cell's first.
    free_start: u32,
    free_len: u32,
}

/// Where one loaded cell's groups and free CPUs are.
#[derive(Clone, Copy, Debug, Default)]
struct Loaded {
    loaded: bool,
    groups_start: u32,
    groups_end: u32,
    free_start: u32,
    free_end: u32,
    /// Nova's `threads_per_core`: the largest core, at least 1.
    tpc: u32,
}

/// The CPUs of one host's cells, grouped by core, loaded on first use and
/// kept for the rest of the host's fit (every guest cell tries the same
/// host cells); buffers reused between hosts.
#[derive(Default)]
pub(crate) struct CellView {
    /// (core, CPU, free) per CPU of the cell being loaded.
    entries: Vec<(u32, u32, bool)>,
    groups: Vec<Group>,
    /// Free dedicated CPUs, cell by cell, group by group, ascending within
    /// a group.
    free: Vec<u32>,
    /// Per host-local cell.
    cells: Vec<Loaded>,
    /// First cluster-wide cell of the host.
    first_cell: usize,
    /// The cell `pack` works on (host-local).
    current: usize,
    /// Per free CPU of the current cell: taken by the pinning being built.
    marks: Vec<bool>,
    /// Positions (in the current cell's free CPUs) chosen, in vCPU order.
    chosen: Vec<u32>,
}

impl CellView {
    /// Forgets the previous host: `cells` are the host's cells.
    pub(crate) fn reset(&mut self, cells: Range<usize>) {
        self.groups.clear();
        self.free.clear();
        self.cells.clear();
        self.cells.resize(cells.len(), Loaded::default());
        self.first_cell = cells.start;
    }

    /// Makes cell `cell` (cluster-wide, of the host last reset) current,
    /// loading it the first time.
    pub(crate) fn load<F: Fetch>(&mut self, inv: &Inventory<F>, cell: usize) {
        let local = cell - self.first_cell;
        self.current = local;
        if self.cells[local].loaded {
            return;
        }
        let cpus = inv.cell_cpus();
        let dedicated = inv.pcpu_flag(PcpuFlag::Dedicated);
        let pinned = inv.pcpu_flag(PcpuFlag::Pinned);
        self.entries.clear();
        for i in cpus.cell(cell) {
            let cpu = cpus.cpus.get(i).copied().unwrap_or(0);
            // A CPU without a core number is a core of its own.
            let core = cpus.cores.get(i).copied().unwrap_or(u32::MAX - cpu);
            let free = dedicated.get(i).copied().unwrap_or(false)
                && !pinned.get(i).copied().unwrap_or(false);
            self.entries.push((core, cpu, free));
        }
        // Usually listed by core already (CPUs ascending, siblings
        // numbered together): sort only when not.
        if !self.entries.is_sorted() {
            self.entries.sort_unstable();
        }
        let groups_start = self.groups.len();
        let mut start = 0;
        while start < self.entries.len() {
            let core = self.entries[start].0;
            let mut end = start + 1;
            while end < self.entries.len() && self.entries[end].0 == core {
                end += 1;
            }
            self.groups.push(Group {
                min_cpu: self.entries[start].1,
                size: (end - start) as u32,
                entries: start as u32,
                free_start: 0,
                free_len: 0,
            });
            start = end;
        }
        let groups = &mut self.groups[groups_start..];
        if !groups.is_sorted_by_key(|g| g.min_cpu) {
            groups.sort_unstable_by_key(|g| g.min_cpu);
        }
        let free_start = self.free.len();
        let mut tpc = 1;
        for g in groups.iter_mut() {
            g.free_start = (self.free.len() - free_start) as u32;
            let range = g.entries as usize..(g.entries + g.size) as usize;
            self.free
                .extend(self.entries[range].iter().filter(|e| e.2).map(|e| e.1));
            g.free_len = (self.free.len() - free_start) as u32 - g.free_start;
            tpc = tpc.max(g.size);
        }
        self.cells[local] = Loaded {
            loaded: true,
            groups_start: groups_start as u32,
            groups_end: self.groups.len() as u32,
            free_start: free_start as u32,
            free_end: self.free.len() as u32,
            tpc,
        };
    }

    fn cell(&self) -> Loaded {
        self.cells[self.current]
    }

    fn cell_free(&self) -> &[u32] {
        let c = self.cell();
        &self.free[c.free_start as usize..c.free_end as usize]
    }

    pub(crate) fn free_count(&self) -> u32 {
        self.cell_free().len() as u32
    }

    pub(crate) fn threads_per_core(&self) -> u32 {
        self.cell().tpc
    }

    /// Nova's `_pack_instance_onto_cores` on the current cell for `vcpus`
    /// (ascending) with one extra CPU for emulator threads when `reserve`.
    /// `all_dedicated`: the cell's CPUs are all dedicated (Nova's legacy
    /// `cpuset == pcpuset`). With `out`, appends the pinning, the claimed
    /// CPUs and the emulator CPU. False when no layout satisfies the
    /// thread policy.
    pub(crate) fn pack(
        &mut self,
        vcpus: &[u32],
        policy: ThreadPolicy,
        reserve: bool,
        all_dedicated: bool,
        out: Option<&mut Assignment>,
    ) -> bool {
        let n = vcpus.len();
        let cell = self.cell();
        let (g0, g1) = (cell.groups_start as usize, cell.groups_end as usize);
        let free_len = (cell.free_end - cell.free_start) as usize;
        self.chosen.clear();
        self.marks.clear();
        self.marks.resize(free_len, false);
        let tpc = cell.tpc;
        let max_free = self.groups[g0..g1]
            .iter()
            .map(|g| g.free_len)
            .max()
            .unwrap_or(0);
        let mut reserved: Option<u32> = None;
        let isolate = policy == ThreadPolicy::Isolate;
        let ok = if isolate {
            // At least one whole free core, and no hyperthreads unless the
            // cell is all dedicated (the legacy configuration).
            if max_free < tpc || (tpc != 1 && !all_dedicated) || n == 0 {
                false
            } else {
                let whole = self.groups[g0..g1]
                    .iter()
                    .filter(|g| g.free_len >= tpc)
                    .count();
                if whole < n {
                    false
                } else {
                    for gi in g0..g1 {
                        let g = self.groups[gi];
                        if self.chosen.len() == n {
                            break;
                        }
                        if g.free_len < tpc {
                            continue;
                        }
                        self.chosen.push(g.free_start);
                        // The whole core is taken: mark it for the reserve.
                        for p in g.free_start..g.free_start + g.free_len {
                            self.marks[p as usize] = true;
                        }
                    }
                    if reserve {
                        reserved = self.first_unmarked();
                        reserved.is_some()
                    } else {
                        true
                    }
                }
            }
        } else if policy == ThreadPolicy::Require && tpc <= 1 {
            false
        } else {
            let mut found = false;
            for t in (1..=max_free).rev() {
                if policy == ThreadPolicy::Require && t <= 1 {
                    continue;
                }
                let count = self.groups[g0..g1]
                    .iter()
                    .filter(|g| g.free_len >= t)
                    .count();
                if count * (t as usize) < n {
                    continue;
                }
                self.chosen.clear();
                self.marks.iter_mut().for_each(|m| *m = false);
                'groups: for gi in g0..g1 {
                    let g = self.groups[gi];
                    if g.free_len < t {
                        continue;
                    }
                    for p in g.free_start..g.free_start + t {
                        if self.chosen.len() == n {
                            break 'groups;
                        }
                        self.chosen.push(p);
                        self.marks[p as usize] = true;
                    }
                }
                if reserve {
                    if n == 0 {
                        continue;
                    }
                    reserved = self.first_unmarked();
                    if reserved.is_none() {
                        continue;
                    }
                }
                found = true;
                break;
            }
            if !found && policy != ThreadPolicy::Require && free_len >= n {
                // Prefer falls back to any free CPUs, in order.
                self.chosen.clear();
                self.chosen.extend(0..n as u32);
                reserved = if reserve && n > 0 {
                    self.cell_free().get(n).copied()
                } else {
                    None
                };
                found = !reserve || reserved.is_some();
            }
            found
        };
        if !ok {
            return false;
        }
        if let Some(out) = out {
            let free = &self.free[cell.free_start as usize..cell.free_end as usize];
            for (i, &p) in self.chosen.iter().enumerate() {
                let cpu = free[p as usize];
                out.pinning.push((vcpus[i], cpu));
                if !isolate {
                    out.claimed_cpus.push(cpu);
                }
            }
            if isolate {
                for &p in &self.chosen {
                    if let Some(g) = self.groups[g0..g1]
                        .iter()
                        .find(|g| g.free_len > 0 && g.free_start == p)
                    {
                        let range = g.free_start as usize..(g.free_start + g.free_len) as usize;
                        out.claimed_cpus.extend_from_slice(&free[range]);
                    }
                }
            }
            if reserved.is_some() {
                out.emulator_cpu = reserved;
            }
        }
        true
    }

    /// The current cell's first free CPU, group by group, not marked.
    fn first_unmarked(&self) -> Option<u32> {
        self.marks
            .iter()
            .position(|m| !m)
            .map(|p| self.cell_free()[p])
    }
}

/// Whether any cell of the host has a core with more than one thread
/// (Nova's `NUMATopology.has_threads`).
pub(crate) fn host_has_threads<F: Fetch>(inv: &Inventory<F>, cells: Range<usize>) -> bool {
    let cpus = inv.cell_cpus();
    for cell in cells {
        let cores = cpus.cores.get(cpus.cell(cell)).unwrap_or(&[]);
        // Cells are small; a quadratic scan allocates nothing.
        for (i, a) in cores.iter().enumerate() {
            if cores[i + 1..].contains(a) {
                return true;
            }
        }
    }
    false
}
