//! The consistency rules of hardware data, applied to everything engines
//! send (`crate::inputs`): inline hosts, case files, the held inventory's
//! snapshots and updates, the VM to place. A fitter trusts the columns
//! (a pinned CPU is dedicated, a device's cell exists, free never exceeds
//! total), so data that breaks them is refused here, with the path of the
//! field at fault (`hosts[3].hardware.numa_cells[1].dedicated_cpus[2]`):
//! 400 `invalid_value` for what the document's schema already rules out,
//! 422 `invalid_snapshot` for values that contradict each other.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Display;

use super::{CpuPolicy, DeviceKind, EmulatorThreads, HostHardware, VmHardwareSpec};
use crate::snapshot::{Host, MAX_CPUS, SnapshotError, SnapshotErrorKind, VmSpec};

/// A value the document's schema already rules out (a negative figure, a
/// number past `int32`, an empty name): 400 `invalid_value`.
fn invalid(path: impl Display, message: impl Into<String>) -> SnapshotError {
    SnapshotError {
        path: path.to_string(),
        kind: SnapshotErrorKind::InvalidValue(message.into()),
    }
}

/// Values each fine alone that contradict each other (a pinned CPU that is
/// not dedicated, a device on a node the host lacks, a vCPU the VM does not
/// have), which no schema can say: 422 `invalid_snapshot`, naming the field.
fn unprocessable(path: impl Display, message: impl Into<String>) -> SnapshotError {
    SnapshotError {
        path: path.to_string(),
        kind: SnapshotErrorKind::Unprocessable(message.into()),
    }
}

/// The largest value the OpenAPI document allows for the `u32` fields here:
/// utoipa describes them as `int32`, so the server refuses what `u32`
/// alone would take beyond it, and takes exactly what the document says.
/// No real NUMA node, CPU number or device count comes near it.
const INT32_MAX: u32 = i32::MAX as u32;

/// Each of `values` (at `path[i]`, or `path` for one) within `int32`.
fn int32(values: &[u32], path: impl Display, one: bool) -> Result<(), SnapshotError> {
    match values.iter().position(|&v| v > INT32_MAX) {
        None => Ok(()),
        Some(i) => Err(invalid(
            if one {
                path.to_string()
            } else {
                format!("{path}[{i}]")
            },
            format!("{} is more than {INT32_MAX}", values[i]),
        )),
    }
}

/// A count of pages within the document's `int64`.
fn int64(value: u64, path: impl Display) -> Result<(), SnapshotError> {
    if value <= i64::MAX as u64 {
        Ok(())
    } else {
        Err(invalid(path, format!("{value} is more than {}", i64::MAX)))
    }
}

/// A figure that must be finite and not negative.
fn non_negative(value: f64, path: impl Display) -> Result<(), SnapshotError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(invalid(
            path,
            format!("must be a finite number, not negative, not {value}"),
        ))
    }
}

/// Every element of `list` is in `of`, and none repeats; errors name
/// `path[i]`.
fn subset_of(
    list: &[u32],
    of: &HashSet<u32>,
    of_name: &str,
    path: &str,
) -> Result<(), SnapshotError> {
    let mut seen = HashSet::with_capacity(list.len());
    for (i, cpu) in list.iter().enumerate() {
        if !seen.insert(*cpu) {
            return Err(unprocessable(
                format_args!("{path}[{i}]"),
                format!("CPU {cpu} is listed twice"),
            ));
        }
        if !of.contains(cpu) {
            return Err(unprocessable(
                format_args!("{path}[{i}]"),
                format!("CPU {cpu} is not in the cell's {of_name}"),
            ));
        }
    }
    Ok(())
}

/// Checks `host.hardware` (at `path`, `hosts[3]`) against itself and the
/// host's `memory_total_mib` and `cpu_threads` metrics when given.
pub fn check_host(host: &Host, path: &str) -> Result<(), SnapshotError> {
    let Some(hw) = &host.hardware else {
        return Ok(());
    };
    let path = format!("{path}.hardware");
    check_cells(host, hw, &path)?;
    check_devices(hw, &path)
}

fn check_cells(host: &Host, hw: &HostHardware, path: &str) -> Result<(), SnapshotError> {
    let cells = hw.numa_cells.len();
    let mut nodes = HashSet::with_capacity(cells);
    let mut host_cpus: HashMap<u32, usize> = HashMap::new();
    let mut memory = 0.0;
    for (c, cell) in hw.numa_cells.iter().enumerate() {
        let path = format!("{path}.numa_cells[{c}]");
        int32(&[cell.node], format_args!("{path}.node"), true)?;
        int32(cell.socket.as_slice(), format_args!("{path}.socket"), true)?;
        int32(&cell.cpus, format_args!("{path}.cpus"), false)?;
        int32(
            &cell.dedicated_cpus,
            format_args!("{path}.dedicated_cpus"),
            false,
        )?;
        int32(&cell.pinned_cpus, format_args!("{path}.pinned_cpus"), false)?;
        for (g, group) in cell.siblings.iter().enumerate() {
            int32(group, format_args!("{path}.siblings[{g}]"), false)?;
        }
        int32(
            &[cell.shared_vcpus_used],
            format_args!("{path}.shared_vcpus_used"),
            true,
        )?;
        int32(&cell.distances, format_args!("{path}.distances"), false)?;
        if !nodes.insert(cell.node) {
            return Err(unprocessable(
                format_args!("{path}.node"),
                format!("node {} is listed twice", cell.node),
            ));
        }
        non_negative(cell.memory_mib, format_args!("{path}.memory_mib"))?;
        if let Some(free) = cell.memory_free_mib {
            non_negative(free, format_args!("{path}.memory_free_mib"))?;
            if free > cell.memory_mib {
                return Err(unprocessable(
                    format_args!("{path}.memory_free_mib"),
                    format!(
                        "{free} is more than the cell's memory_mib {}",
                        cell.memory_mib
                    ),
                ));
            }
        }
        memory += cell.memory_mib;

        let cpus: HashSet<u32> = cell.cpus.iter().copied().collect();
        for (i, cpu) in cell.cpus.iter().enumerate() {
            if let Some(other) = host_cpus.insert(*cpu, c) {
                let message = if other == c {
                    format!("CPU {cpu} is listed twice")
                } else {
                    format!("CPU {cpu} is also in numa_cells[{other}]")
                };
                return Err(unprocessable(format_args!("{path}.cpus[{i}]"), message));
            }
        }
        subset_of(
            &cell.dedicated_cpus,
            &cpus,
            "cpus",
            &format!("{path}.dedicated_cpus"),
        )?;
        let dedicated: HashSet<u32> = cell.dedicated_cpus.iter().copied().collect();
        subset_of(
            &cell.pinned_cpus,
            &dedicated,
            "dedicated_cpus",
            &format!("{path}.pinned_cpus"),
        )?;
        let mut grouped = HashSet::new();
        for (g, group) in cell.siblings.iter().enumerate() {
            for (i, cpu) in group.iter().enumerate() {
                let at = format_args!("{path}.siblings[{g}][{i}]");
                if !cpus.contains(cpu) {
                    return Err(unprocessable(
                        at,
                        format!("CPU {cpu} is not in the cell's cpus"),
                    ));
                }
                if !grouped.insert(*cpu) {
                    return Err(unprocessable(
                        at,
                        format!("CPU {cpu} is in more than one sibling group"),
                    ));
                }
            }
        }

        let mut sizes = HashSet::with_capacity(cell.pages.len());
        for (p, pages) in cell.pages.iter().enumerate() {
            let path = format!("{path}.pages[{p}]");
            int32(&[pages.size_kib], format_args!("{path}.size_kib"), true)?;
            int64(pages.total, format_args!("{path}.total"))?;
            int64(pages.free, format_args!("{path}.free"))?;
            if pages.size_kib == 0 {
                return Err(invalid(
                    format_args!("{path}.size_kib"),
                    "must be at least 1",
                ));
            }
            if !sizes.insert(pages.size_kib) {
                return Err(unprocessable(
                    format_args!("{path}.size_kib"),
                    format!("page size {} KiB is listed twice", pages.size_kib),
                ));
            }
            if pages.free > pages.total {
                return Err(unprocessable(
                    format_args!("{path}.free"),
                    format!("{} is more than total {}", pages.free, pages.total),
                ));
            }
        }
        if !cell.distances.is_empty() && cell.distances.len() != cells {
            return Err(unprocessable(
                format_args!("{path}.distances"),
                format!(
                    "has {} entries; expected one per cell of the host ({cells}) or none",
                    cell.distances.len()
                ),
            ));
        }
    }
    if let Some(&total) = host.metrics.get("memory_total_mib")
        && memory > total
    {
        return Err(unprocessable(
            format_args!("{path}.numa_cells"),
            format!(
                "the cells' memory_mib add up to {memory}, more than the host's memory_total_mib {total}"
            ),
        ));
    }
    if let Some(&threads) = host.metrics.get("cpu_threads")
        && host_cpus.len() as f64 > threads
    {
        return Err(unprocessable(
            format_args!("{path}.numa_cells"),
            format!(
                "the cells list {} CPUs, more than the host's cpu_threads {threads}",
                host_cpus.len()
            ),
        ));
    }
    Ok(())
}

fn check_devices(hw: &HostHardware, path: &str) -> Result<(), SnapshotError> {
    let nodes: HashSet<u32> = hw.numa_cells.iter().map(|c| c.node).collect();
    let mut addresses: HashMap<&str, DeviceKind> = HashMap::new();
    for (d, device) in hw.pci_devices.iter().enumerate() {
        let path = format!("{path}.pci_devices[{d}]");
        int32(
            device.numa_node.as_slice(),
            format_args!("{path}.numa_node"),
            true,
        )?;
        int32(&[device.count], format_args!("{path}.count"), true)?;
        int32(device.free.as_slice(), format_args!("{path}.free"), true)?;
        if let Some(address) = device.address.as_deref() {
            if address.is_empty() {
                return Err(invalid(format_args!("{path}.address"), "must not be empty"));
            }
            if device.count > 1 {
                return Err(unprocessable(
                    format_args!("{path}.address"),
                    format!(
                        "a pool of {} devices has no single address; give one per pool of 1",
                        device.count
                    ),
                ));
            }
            if addresses.insert(address, device.kind).is_some() {
                return Err(unprocessable(
                    format_args!("{path}.address"),
                    format!("address {address} is listed twice"),
                ));
            }
        }
        if device.free() > device.count {
            return Err(unprocessable(
                format_args!("{path}.free"),
                format!("{} is more than count {}", device.free(), device.count),
            ));
        }
        if let Some(node) = device.numa_node
            && !nodes.contains(&node)
        {
            return Err(unprocessable(
                format_args!("{path}.numa_node"),
                format!("the host has no NUMA cell with node {node}"),
            ));
        }
    }
    for (d, device) in hw.pci_devices.iter().enumerate() {
        let Some(parent) = device.parent.as_deref() else {
            continue;
        };
        let at = format_args!("{path}.pci_devices[{d}].parent");
        if device.kind != DeviceKind::VirtualFunction {
            return Err(unprocessable(
                at,
                "only a virtual_function pool has a parent",
            ));
        }
        if addresses.get(parent) != Some(&DeviceKind::PhysicalFunction) {
            return Err(unprocessable(
                at,
                format!("{parent} is not the address of a physical_function on this host"),
            ));
        }
    }
    for (m, mdev) in hw.mdev_types.iter().enumerate() {
        int32(
            &[mdev.free],
            format_args!("{path}.mdev_types[{m}].free"),
            true,
        )?;
        if mdev.name.is_empty() {
            return Err(invalid(
                format_args!("{path}.mdev_types[{m}].name"),
                "must not be empty",
            ));
        }
        if let Some(parent) = mdev.parent.as_deref()
            && !addresses.contains_key(parent)
        {
            return Err(unprocessable(
                format_args!("{path}.mdev_types[{m}].parent"),
                format!("{parent} is not the address of a PCI device on this host"),
            ));
        }
    }
    Ok(())
}

/// Checks `vm.hardware` (at `path`, `vm`) against itself and the VM's
/// `vcpus` and `memory_mib`.
pub fn check_vm(vm: &VmSpec, path: &str) -> Result<(), SnapshotError> {
    let Some(hw) = &vm.hardware else {
        return Ok(());
    };
    let path = format!("{path}.hardware");
    check_vm_cells(vm, hw, &path)?;
    let pinned = pinned_vcpus(vm.vcpus, hw);
    if pinned > MAX_CPUS as usize {
        return Err(unprocessable(
            format_args!("{path}.cpu_policy"),
            format!("needs {pinned} dedicated host CPUs, more than any host has ({MAX_CPUS})"),
        ));
    }
    for (r, request) in hw.pci_requests.iter().enumerate() {
        int32(
            &[request.count],
            format_args!("{path}.pci_requests[{r}].count"),
            true,
        )?;
        if request.count == 0 {
            return Err(invalid(
                format_args!("{path}.pci_requests[{r}].count"),
                "must be at least 1",
            ));
        }
    }
    if let Some(super::PageSizeSpec::Kib(0)) = hw.page_size {
        return Err(invalid(
            format_args!("{path}.page_size"),
            "must be small, large, any or a size of at least 1 KiB",
        ));
    }
    Ok(())
}

/// Host CPUs the request pins: every vCPU with `dedicated`, the cells'
/// dedicated vCPUs with `mixed`, plus one for isolated emulator threads.
fn pinned_vcpus(vcpus: u32, hw: &VmHardwareSpec) -> usize {
    let vcpus = match hw.cpu_policy {
        CpuPolicy::Shared => return 0,
        CpuPolicy::Dedicated => vcpus as usize,
        CpuPolicy::Mixed => hw.numa_cells.iter().map(|c| c.dedicated_vcpus.len()).sum(),
    };
    vcpus + usize::from(hw.emulator_threads == EmulatorThreads::Isolate)
}

fn check_vm_cells(vm: &VmSpec, hw: &VmHardwareSpec, path: &str) -> Result<(), SnapshotError> {
    if hw.numa_cells.is_empty() {
        return Ok(());
    }
    let mut seen: HashMap<u32, usize> = HashMap::new();
    let mut memory = 0.0;
    for (c, cell) in hw.numa_cells.iter().enumerate() {
        let path = format!("{path}.numa_cells[{c}]");
        int32(&cell.host_nodes, format_args!("{path}.host_nodes"), false)?;
        for (field, list) in [
            ("shared_vcpus", &cell.shared_vcpus),
            ("dedicated_vcpus", &cell.dedicated_vcpus),
        ] {
            for (i, &vcpu) in list.iter().enumerate() {
                let at = format_args!("{path}.{field}[{i}]");
                if vcpu >= vm.vcpus {
                    return Err(unprocessable(
                        at,
                        format!("vCPU {vcpu} does not exist: the VM has {} vcpus", vm.vcpus),
                    ));
                }
                if let Some(other) = seen.insert(vcpu, c) {
                    let message = if other == c {
                        format!("vCPU {vcpu} is listed twice in the cell")
                    } else {
                        format!("vCPU {vcpu} is also in numa_cells[{other}]")
                    };
                    return Err(unprocessable(at, message));
                }
            }
        }
        non_negative(cell.memory_mib, format_args!("{path}.memory_mib"))?;
        memory += cell.memory_mib;
        let nodes: BTreeSet<u32> = cell.host_nodes.iter().copied().collect();
        if nodes.len() != cell.host_nodes.len() {
            return Err(unprocessable(
                format_args!("{path}.host_nodes"),
                "a node is listed twice",
            ));
        }
    }
    if (memory - vm.memory_mib).abs() > 1e-6 * vm.memory_mib.abs().max(1.0) {
        return Err(unprocessable(
            format_args!("{path}.numa_cells"),
            format!(
                "the cells' memory_mib add up to {memory}, not the VM's memory_mib {}",
                vm.memory_mib
            ),
        ));
    }
    Ok(())
}
