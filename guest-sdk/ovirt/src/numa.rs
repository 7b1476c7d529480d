//! oVirt's vNUMA fitting: `NumaPinningHelper.findAssignment`, which the
//! `NUMA` filter and the `CPU and NUMA pinning compatibility` weight share.
//!
//! oVirt's check is much simpler than Nova's `numa_fit_instance_to_host`
//! (and so than `sandpiper-hardware`): only guest cells *pinned* to host
//! nodes are fitted, each onto one of the host nodes it is pinned to, by
//! free memory (or free huge pages of the VM's page size) alone; CPUs count
//! only for the weight, and only as "a pinned vCPU's host CPUs lie in the
//! node". Unpinned guest cells are ignored. Nova's fitter places every
//! cell by CPUs, memory and pages, which would reject hosts oVirt accepts,
//! so this is a small check of its own.

use std::collections::{BTreeMap, BTreeSet};

use sandpiper_guest::Inventory;
use sandpiper_guest::model::hardware::{CellMetric, PageSize, VmNumaCell};

/// One host NUMA node as the fitting sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct HostNode {
    /// The node's number on its host (what guest cells are pinned to).
    pub node: u32,
    /// Free memory, MiB.
    pub memory_free_mib: f64,
    /// Free pages per page size (KiB).
    pub pages_free: Vec<(u32, f64)>,
    /// The node's CPUs (for CPU-pinning compatibility).
    pub cpus: Vec<u32>,
}

/// Host `host`'s NUMA nodes; `with_cpus` also reads their CPU lists.
pub fn host_nodes(inventory: &Inventory, host: u32, with_cpus: bool) -> Vec<HostNode> {
    let topology = inventory.numa_topology();
    let free = inventory.cell_metric(CellMetric::MemoryFreeMib);
    let pages = inventory.cell_pages();
    let cpus = with_cpus.then(|| inventory.cell_cpus());
    topology
        .host_cells(host as usize)
        .map(|cell| HostNode {
            node: topology.node_ids.get(cell).copied().unwrap_or(u32::MAX),
            memory_free_mib: free.get(cell).copied().unwrap_or(0.0),
            pages_free: pages
                .cell(cell)
                .filter_map(|i| Some((*pages.size_kib.get(i)?, *pages.free.get(i)?)))
                .collect(),
            cpus: cpus
                .map(|cpus| {
                    cpus.cell(cell)
                        .filter_map(|i| cpus.cpus.get(i).copied())
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// Number of NUMA cells host `host` reports.
pub fn node_count(inventory: &Inventory, host: u32) -> usize {
    inventory.numa_topology().host_cells(host as usize).len()
}

/// oVirt's `VDS.isNumaSupport`: the host reports more than one NUMA node
/// (`VdsBrokerObjectsBuilder`: `numaNodeList.size() > 1`).
pub fn numa_support(inventory: &Inventory, host: u32) -> bool {
    node_count(inventory, host) > 1
}

/// The huge page size oVirt fits vNUMA cells with: the VM's exact page
/// size (oVirt's `hugepages` custom property); `None` fits by memory.
pub fn fit_page_kib(page_size: PageSize) -> Option<u32> {
    match page_size {
        PageSize::Kib(size) if size > 0 => Some(size),
        _ => None,
    }
}

/// Whether any guest cell is pinned to host nodes.
pub fn any_cell_pinned(cells: &[VmNumaCell]) -> bool {
    cells.iter().any(|cell| !cell.host_nodes.is_empty())
}

/// Finds an assignment of the VM's pinned cells to host nodes: each onto
/// one of the nodes it is pinned to, with enough free memory (or free
/// pages of `page_kib`) left after the cells placed before it. With
/// `pinning` (vCPU → host CPUs), a cell's pinned vCPUs must each have a
/// host CPU in the node too. Returns, per guest cell, the index into
/// `nodes` it went to (`None` for an unpinned cell), or `None` when no
/// assignment exists, including when a cell is pinned to a node the host
/// does not have.
pub fn find_assignment(
    cells: &[VmNumaCell],
    nodes: &[HostNode],
    page_kib: Option<u32>,
    pinning: Option<&BTreeMap<u32, BTreeSet<u32>>>,
) -> Option<Vec<Option<usize>>> {
    let mut positions = Vec::with_capacity(cells.len());
    for cell in cells {
        let mut wanted = Vec::with_capacity(cell.host_nodes.len());
        for node in &cell.host_nodes {
            wanted.push(nodes.iter().position(|n| n.node == *node)?);
        }
        positions.push(wanted);
    }
    let mut memory: Vec<f64> = nodes.iter().map(|n| n.memory_free_mib).collect();
    let mut pages: Vec<f64> = nodes
        .iter()
        .map(|n| match page_kib {
            Some(size) => n
                .pages_free
                .iter()
                .find(|(s, _)| *s == size)
                .map_or(-1.0, |(_, free)| *free),
            None => 0.0,
        })
        .collect();
    let mut assignment = vec![None; cells.len()];
    let fitted = fit(
        0,
        cells,
        &positions,
        nodes,
        page_kib,
        pinning,
        &mut memory,
        &mut pages,
        &mut assignment,
    );
    fitted.then_some(assignment)
}

/// Pages of `page_kib` a cell of `memory_mib` needs, as oVirt computes it:
/// `memory / (size / 1024)` in whole MiB, rounded down.
fn pages_needed(memory_mib: f64, page_kib: u32) -> f64 {
    let page_mib = page_kib / 1024;
    if page_mib == 0 {
        // Smaller than 1 MiB pages: oVirt would divide by zero; count exactly.
        (memory_mib * 1024.0 / f64::from(page_kib)).ceil()
    } else {
        (memory_mib.floor() / f64::from(page_mib)).floor()
    }
}

#[allow(clippy::too_many_arguments)]
fn fit(
    index: usize,
    cells: &[VmNumaCell],
    positions: &[Vec<usize>],
    nodes: &[HostNode],
    page_kib: Option<u32>,
    pinning: Option<&BTreeMap<u32, BTreeSet<u32>>>,
    memory: &mut [f64],
    pages: &mut [f64],
    assignment: &mut [Option<usize>],
) -> bool {
    let Some(cell) = cells.get(index) else {
        return true;
    };
    if positions[index].is_empty() {
        return fit(
            index + 1,
            cells,
            positions,
            nodes,
            page_kib,
            pinning,
            memory,
            pages,
            assignment,
        );
    }
    for &node in &positions[index] {
        if let Some(pinning) = pinning
            && !cpus_fit(cell, &nodes[node].cpus, pinning)
        {
            continue;
        }
        let (column, need): (&mut [f64], f64) = match page_kib {
            None => (&mut *memory, cell.memory_mib),
            Some(size) => (&mut *pages, pages_needed(cell.memory_mib, size)),
        };
        let before = column[node];
        if before < 0.0 || before < need {
            continue;
        }
        column[node] = before - need;
        assignment[index] = Some(node);
        if fit(
            index + 1,
            cells,
            positions,
            nodes,
            page_kib,
            pinning,
            memory,
            pages,
            assignment,
        ) {
            return true;
        }
        match page_kib {
            None => memory[node] = before,
            Some(_) => pages[node] = before,
        }
        assignment[index] = None;
    }
    false
}

/// oVirt's `vmNodeFitsHostNodeCpuPinning`: every pinned vCPU of the cell
/// has at least one of its host CPUs in the node.
fn cpus_fit(cell: &VmNumaCell, node_cpus: &[u32], pinning: &BTreeMap<u32, BTreeSet<u32>>) -> bool {
    cell.shared_vcpus
        .iter()
        .chain(&cell.dedicated_vcpus)
        .all(|vcpu| match pinning.get(vcpu) {
            None => true,
            Some(cpus) => cpus.iter().any(|cpu| node_cpus.contains(cpu)),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(node: u32, free: f64, cpus: &[u32]) -> HostNode {
        HostNode {
            node,
            memory_free_mib: free,
            pages_free: vec![(2048, 100.0)],
            cpus: cpus.to_vec(),
        }
    }

    fn cell(vcpus: &[u32], memory: f64, pinned: &[u32]) -> VmNumaCell {
        VmNumaCell {
            shared_vcpus: vcpus.to_vec(),
            dedicated_vcpus: Vec::new(),
            memory_mib: memory,
            host_nodes: pinned.to_vec(),
        }
    }

    #[test]
    fn backtracks_to_find_an_assignment() {
        let nodes = [node(0, 1000.0, &[0]), node(1, 600.0, &[1])];
        // The first cell could take either node; only node 0 leaves room
        // for the second... and only if the first goes to node 1.
        let cells = [cell(&[0], 500.0, &[0, 1]), cell(&[1], 900.0, &[0])];
        let got = find_assignment(&cells, &nodes, None, None).unwrap();
        assert_eq!(got, [Some(1), Some(0)]);
        let too_big = [cell(&[0], 700.0, &[1])];
        assert!(find_assignment(&too_big, &nodes, None, None).is_none());
    }

    #[test]
    fn unpinned_cells_are_ignored_and_missing_nodes_fail() {
        let nodes = [node(0, 100.0, &[0])];
        assert_eq!(
            find_assignment(&[cell(&[0], 1e9, &[])], &nodes, None, None).unwrap(),
            [None]
        );
        assert!(find_assignment(&[cell(&[0], 1.0, &[3])], &nodes, None, None).is_none());
    }

    #[test]
    fn huge_pages_replace_memory() {
        let nodes = [node(0, 0.0, &[0])];
        // 200 MiB in 2 MiB pages: 100 pages, all free.
        assert!(find_assignment(&[cell(&[0], 200.0, &[0])], &nodes, Some(2048), None).is_some());
        assert!(find_assignment(&[cell(&[0], 202.0, &[0])], &nodes, Some(2048), None).is_none());
        assert!(find_assignment(&[cell(&[0], 2.0, &[0])], &nodes, Some(1_048_576), None).is_none());
    }

    #[test]
    fn cpu_pinning_must_land_in_the_node() {
        let nodes = [node(0, 1000.0, &[0, 1]), node(1, 1000.0, &[2, 3])];
        let pinning = BTreeMap::from([(0, BTreeSet::from([2]))]);
        let cells = [cell(&[0], 10.0, &[0])];
        assert!(find_assignment(&cells, &nodes, None, Some(&pinning)).is_none());
        let cells = [cell(&[0], 10.0, &[0, 1])];
        assert_eq!(
            find_assignment(&cells, &nodes, None, Some(&pinning)).unwrap(),
            [Some(1)]
        );
    }
}
