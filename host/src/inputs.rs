//! Checks of the figures and ids in what engines send: snapshots (inline or
//! pushed as the held inventory), host updates, the VM to place and the
//! instance count. Serde checks the shape; this module checks that the
//! values mean something, so a negative memory size or a zero vCPU count is
//! refused with the field named instead of silently read as 0.
//!
//! The rules:
//!
//! * host and VM ids follow `crate::names` (not empty, no control or format
//!   characters, NFC, at most `names::MAX_ID_BYTES`); display names
//!   follow the name rules;
//! * every host metric (totals, counts, percentages, versions, free swap)
//!   is finite and not negative, except free memory and free disk, which
//!   an overcommitting engine reports below zero ([`MAY_BE_NEGATIVE`]);
//!   engine-defined named metrics are finite;
//! * memory, disk and CPU usage of a VM are finite and not negative; vCPUs,
//!   sockets, cores per socket and threads per core are 1 to
//!   [`MAX_CPUS`]; a group's priority is finite;
//! * hardware data is consistent (`crate::hardware::check`: a pinned CPU
//!   is dedicated, a device's NUMA node exists, a VM's cells add up);
//! * `count` is 1 to `MAX_INSTANCES_PER_REQUEST`.
//!
//! JSON itself cannot carry NaN or infinity (serde_json refuses `NaN` and
//! numbers out of `f64` range), but fixtures and library callers build
//! these types directly, so finiteness is checked all the same.
//!
//! Errors are [`SnapshotErrorKind::InvalidValue`] at the field's path; the
//! API answers them 400 `invalid_value` naming the field.

use crate::names::{self, NameError};
use sandpiper_model::Vm;

use crate::snapshot::{
    Cluster, Host, HostColumns, HostIndex, MAX_CPUS, MAY_BE_NEGATIVE, RunningVm, Snapshot,
    SnapshotError, SnapshotErrorKind, VmColumns, VmRow, VmSpec,
};

fn invalid(path: impl std::fmt::Display, message: impl Into<String>) -> SnapshotError {
    SnapshotError {
        path: path.to_string(),
        kind: SnapshotErrorKind::InvalidValue(message.into()),
    }
}

fn name_error(path: impl std::fmt::Display) -> impl FnOnce(NameError) -> SnapshotError {
    move |e| match e {
        NameError::NotNfc => SnapshotError {
            path: path.to_string(),
            kind: SnapshotErrorKind::NotNfc(e.to_string()),
        },
        _ => invalid(path, e.to_string()),
    }
}

/// Checks a host, VM or instance id at `path`.
pub fn check_id(id: &str, path: impl std::fmt::Display) -> Result<(), SnapshotError> {
    names::check_id(id).map_err(name_error(path))
}

/// Checks an optional display name at `path`.
pub fn check_display_name(
    name: Option<&str>,
    path: impl std::fmt::Display,
) -> Result<(), SnapshotError> {
    match name {
        Some(name) => names::check_name(name).map_err(name_error(path)),
        None => Ok(()),
    }
}

/// A figure that must be finite.
fn finite(value: f64, path: impl std::fmt::Display) -> Result<(), SnapshotError> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(invalid(
            path,
            format!("must be a finite number, not {value}"),
        ))
    }
}

/// A figure that must be finite and not negative.
fn non_negative(value: f64, path: impl std::fmt::Display) -> Result<(), SnapshotError> {
    finite(value, &path)?;
    if value < 0.0 {
        Err(invalid(path, format!("must not be negative, not {value}")))
    } else {
        Ok(())
    }
}

/// A count that must be at least 1.
fn cpu_count(value: u32, path: impl std::fmt::Display) -> Result<(), SnapshotError> {
    if (1..=MAX_CPUS).contains(&value) {
        Ok(())
    } else {
        Err(invalid(
            path,
            format!("must be 1 to {MAX_CPUS}, not {value}"),
        ))
    }
}

/// Most instances one request may place. Each instance is one run of the
/// policy with the cluster's lock held (about a millisecond at 10,000
/// hosts), so this bounds one request's hold to a fraction of a second;
/// larger bursts are several requests, which interleave with others'.
pub const MAX_INSTANCES_PER_REQUEST: u32 = 256;

/// Checks a snapshot's values and ids, then builds its columns: for
/// everything an engine sends. Held inventories are rebuilt with
/// [`Snapshot::build`] alone, so data accepted by an older version never
/// makes a rebuild fail.
pub fn build_checked(snapshot: &Snapshot) -> Result<Cluster, SnapshotError> {
    check_snapshot(snapshot)?;
    snapshot.build()
}

/// Checks a VM to place (named `path` in errors), then turns it into the VM
/// units see, its host ids resolved against `hosts`.
pub fn to_vm_checked(vm: &VmSpec, hosts: &HostIndex, path: &str) -> Result<Vm, SnapshotError> {
    check_vm(vm, path)?;
    vm.to_vm(hosts, path)
}

/// A list a body sends inline (`hosts`, `vms`), read one element at a
/// time: each element is checked ([`check_host`], [`check_running_vm`]),
/// added to its columns as soon as it is read, and dropped. A 10,000-host
/// body is never held as 10,000 [`Host`]s and 30,000 [`RunningVm`]s,
/// which made reading it, building its columns and freeing it again the
/// most of an inline decision (docs/performance.md, "Inline hosts read
/// one at a time").
///
/// A refused element does not stop the read: the rest of the list is
/// still read (so a body malformed further on is refused as malformed, as
/// before), only no longer built, and [`CheckedHosts::build`] answers the
/// first refusal, with the same error [`build_checked`] gives.
#[derive(Clone, Default)]
pub struct Checked<C> {
    /// Boxed: the host builders are 2 KiB, and requests are moved about.
    columns: Box<C>,
    read: usize,
    refused: Option<SnapshotError>,
}

/// Inline hosts, read into their columns.
pub type CheckedHosts = Checked<HostColumns<'static>>;

/// The VMs on inline hosts, read into their columns; each VM's host is
/// looked up when the hosts are built, so `vms` may come first.
pub type CheckedVms = Checked<VmColumns>;

/// Columns an inline list is read into ([`Checked`]).
pub trait CheckedRows: Default {
    type Row: serde::de::DeserializeOwned;
    /// Checks `row`, the list's element `index`, and adds it.
    fn check_and_push(&mut self, index: usize, row: Self::Row) -> Result<(), SnapshotError>;
}

impl CheckedRows for HostColumns<'static> {
    type Row = Host;
    fn check_and_push(&mut self, index: usize, host: Host) -> Result<(), SnapshotError> {
        check_host(&host, &format!("hosts[{index}]"))?;
        self.push_owned(host)
    }
}

impl CheckedRows for VmColumns {
    type Row = RunningVm;
    fn check_and_push(&mut self, index: usize, vm: RunningVm) -> Result<(), SnapshotError> {
        let row = vm.row();
        check_running_vm(&row, format_args!("vms[{index}]"))?;
        self.push(row)
    }
}

impl<C: CheckedRows> Checked<C> {
    /// Elements read.
    pub fn len(&self) -> usize {
        self.read
    }

    pub fn is_empty(&self) -> bool {
        self.read == 0
    }

    fn push(&mut self, row: C::Row) {
        let index = self.read;
        self.read += 1;
        if self.refused.is_none()
            && let Err(e) = self.columns.check_and_push(index, row)
        {
            self.refused = Some(e);
        }
    }
}

impl CheckedHosts {
    /// The columns of these hosts and of `vms` on them. The hosts' first
    /// refusal comes before the VMs', as in [`build_checked`].
    pub fn build(self, vms: CheckedVms) -> Result<Cluster, SnapshotError> {
        match (self.refused, vms.refused) {
            (Some(e), _) | (None, Some(e)) => Err(e),
            (None, None) => self.columns.finish(*vms.columns),
        }
    }
}

impl<C> std::fmt::Debug for Checked<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked")
            .field("read", &self.read)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl<'de, C: CheckedRows> serde::Deserialize<'de> for Checked<C> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct List<C>(std::marker::PhantomData<C>);
        impl<'de, C: CheckedRows> serde::de::Visitor<'de> for List<C> {
            type Value = Checked<C>;
            // The words serde gives a `Vec`, so a body that is not a list
            // is refused in the same words as before.
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Checked<C>, A::Error> {
                let mut list = Checked::<C>::default();
                while let Some(row) = seq.next_element()? {
                    list.push(row);
                }
                Ok(list)
            }
        }
        deserializer.deserialize_seq(List(std::marker::PhantomData))
    }
}

/// Checks every host and VM of `snapshot`; paths are `hosts[i]...` and
/// `vms[i]...`.
pub fn check_snapshot(snapshot: &Snapshot) -> Result<(), SnapshotError> {
    for (i, host) in snapshot.hosts.iter().enumerate() {
        check_host(host, &format!("hosts[{i}]"))?;
    }
    for (i, vm) in snapshot.vms.iter().enumerate() {
        check_running_vm(&vm.row(), format_args!("vms[{i}]"))?;
    }
    Ok(())
}

/// Checks one host at `path` (`hosts[3]`).
pub fn check_host(host: &Host, path: &str) -> Result<(), SnapshotError> {
    check_id(&host.id, format_args!("{path}.id"))?;
    check_display_name(host.name.as_deref(), format_args!("{path}.name"))?;
    for (name, &value) in &host.metrics {
        check_host_metric(name, value, format_args!("{path}.metrics.{name}"))?;
    }
    for (name, &value) in &host.named_metrics {
        check_named_metric(value, format_args!("{path}.named_metrics.{name}"))?;
    }
    crate::hardware::check::check_host(host, path)
}

/// Checks a host's figure for metric `name` (its snapshot spelling) at
/// `path`.
pub fn check_host_metric(
    name: &str,
    value: f64,
    path: impl std::fmt::Display,
) -> Result<(), SnapshotError> {
    if MAY_BE_NEGATIVE.contains(&name) {
        finite(value, path)
    } else {
        non_negative(value, path)
    }
}

/// Checks a host's engine-defined metric at `path`.
pub fn check_named_metric(value: f64, path: impl std::fmt::Display) -> Result<(), SnapshotError> {
    finite(value, path)
}

/// Checks a VM's vCPU count, sent as a figure (a compact body's column),
/// at `path`, and gives it as a count.
pub fn vcpus_from_figure(value: f64, path: impl std::fmt::Display) -> Result<u32, SnapshotError> {
    if value.fract() == 0.0 && (1.0..=f64::from(MAX_CPUS)).contains(&value) {
        Ok(value as u32)
    } else {
        Err(invalid(
            path,
            format!("must be 1 to {MAX_CPUS}, not {value}"),
        ))
    }
}

/// Checks one VM running on a host, at `path` (`vms[2]`).
/// `path` is formatted only for an error: a compact body's 30,000 VMs
/// are checked without a path built each.
pub fn check_running_vm(vm: &VmRow<'_>, path: impl std::fmt::Display) -> Result<(), SnapshotError> {
    check_id(vm.id, format_args!("{path}.id"))?;
    check_display_name(vm.name, format_args!("{path}.name"))?;
    non_negative(vm.memory_mib, format_args!("{path}.memory_mib"))?;
    if let Some(g) = vm.memory_guaranteed_mib {
        non_negative(g, format_args!("{path}.memory_guaranteed_mib"))?;
    }
    cpu_count(vm.vcpus, format_args!("{path}.vcpus"))?;
    non_negative(
        vm.cpu_usage_percent,
        format_args!("{path}.cpu_usage_percent"),
    )
}

/// Checks the VM to place, at `path` (`vm`). Its id may be empty for an
/// inline decision (nothing is keyed by it); a decision over the held
/// inventory refuses an empty id where it makes the claim.
pub fn check_vm(vm: &VmSpec, path: &str) -> Result<(), SnapshotError> {
    if !vm.id.is_empty() {
        check_id(&vm.id, format_args!("{path}.id"))?;
    }
    check_display_name(vm.name.as_deref(), format_args!("{path}.name"))?;
    non_negative(vm.memory_mib, format_args!("{path}.memory_mib"))?;
    if let Some(g) = vm.memory_guaranteed_mib {
        non_negative(g, format_args!("{path}.memory_guaranteed_mib"))?;
    }
    cpu_count(vm.vcpus, format_args!("{path}.vcpus"))?;
    if let Some(sockets) = vm.cpu_sockets {
        cpu_count(sockets, format_args!("{path}.cpu_sockets"))?;
    }
    cpu_count(
        vm.cpu_cores_per_socket,
        format_args!("{path}.cpu_cores_per_socket"),
    )?;
    cpu_count(
        vm.cpu_threads_per_core,
        format_args!("{path}.cpu_threads_per_core"),
    )?;
    if let Some(usage) = vm.cpu_usage_percent {
        non_negative(usage, format_args!("{path}.cpu_usage_percent"))?;
    }
    non_negative(vm.disk_gib, format_args!("{path}.disk_gib"))?;
    for (i, group) in vm.groups.iter().enumerate() {
        if !group.priority.is_finite() {
            return Err(invalid(
                format_args!("{path}.groups[{i}].priority"),
                format!("must be a finite number, not {}", group.priority),
            ));
        }
    }
    crate::hardware::check::check_vm(vm, path)
}

/// Checks the number of instances to place (field `count`).
pub fn check_count(count: u32) -> Result<(), SnapshotError> {
    if (1..=MAX_INSTANCES_PER_REQUEST).contains(&count) {
        Ok(())
    } else {
        Err(invalid(
            "count",
            format!("must be 1 to {MAX_INSTANCES_PER_REQUEST}, not {count}"),
        ))
    }
}

/// Checks the instance ids of a request (field `instance_ids`).
pub fn check_instance_ids(ids: &[String]) -> Result<(), SnapshotError> {
    for (i, id) in ids.iter().enumerate() {
        check_id(id, format_args!("instance_ids[{i}]"))?;
    }
    Ok(())
}

/// A file a command reads (`-`: stdin), at most `limit` bytes: `Ok(None)`
/// when it holds more, which is known after reading one byte past the
/// limit, never the whole. The in-process commands (`sandpiper iallocator`,
/// `sandpiper simulate`) read their inputs through it.
pub fn read_at_most(path: &std::path::Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let reader: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(path)?)
    };
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::snapshot::from_json;

    fn snapshot_error(text: &str) -> (String, SnapshotErrorKind) {
        let snapshot: Snapshot = from_json(text).expect("valid JSON");
        let e = build_checked(&snapshot).map(|_| ()).unwrap_err();
        (e.path, e.kind)
    }

    fn vm_error(text: &str) -> String {
        let vm: VmSpec = from_json(text).expect("valid JSON");
        check_vm(&vm, "vm").unwrap_err().path
    }

    #[test]
    fn negative_and_zero_figures_are_refused_with_the_field() {
        for (text, path) in [
            (
                r#"{"hosts": [{"id": "h", "metrics": {"memory_total_mib": -1}}]}"#,
                "hosts[0].metrics.memory_total_mib",
            ),
            (
                r#"{"hosts": [{"id": "h", "metrics": {"disk_total_gib": -0.5}}]}"#,
                "hosts[0].metrics.disk_total_gib",
            ),
            (
                r#"{"hosts": [{"id": "h", "metrics": {"swap_free_mib": -1}}]}"#,
                "hosts[0].metrics.swap_free_mib",
            ),
            (
                r#"{"hosts": [{"id": "h", "metrics": {"cpu_cores": -8}}]}"#,
                "hosts[0].metrics.cpu_cores",
            ),
            (
                r#"{"hosts": [{"id": "h"}], "vms": [{"id": "v", "host": "h", "memory_mib": -5}]}"#,
                "vms[0].memory_mib",
            ),
            (
                r#"{"hosts": [{"id": "h"}], "vms": [{"id": "v", "host": "h", "vcpus": 0}]}"#,
                "vms[0].vcpus",
            ),
            (r#"{"hosts": [{"id": "h\u0000"}]}"#, "hosts[0].id"),
            (r#"{"hosts": [{"id": "h\u202e1"}]}"#, "hosts[0].id"),
            (r#"{"hosts": [{"id": "h", "name": " h"}]}"#, "hosts[0].name"),
            (
                r#"{"hosts": [{"id": "h"}], "vms": [{"id": "v\u200b", "host": "h"}]}"#,
                "vms[0].id",
            ),
        ] {
            let (got, kind) = snapshot_error(text);
            assert_eq!(got, path, "{text}");
            assert!(matches!(kind, SnapshotErrorKind::InvalidValue(_)), "{text}");
        }
        let long = format!(r#"{{"hosts": [{{"id": "{}"}}]}}"#, "x".repeat(10_000));
        assert_eq!(snapshot_error(&long).0, "hosts[0].id");
    }

    #[test]
    fn the_vm_to_place_is_checked() {
        assert_eq!(vm_error(r#"{"memory_mib": -1}"#), "vm.memory_mib");
        assert_eq!(vm_error(r#"{"vcpus": 0}"#), "vm.vcpus");
        assert_eq!(vm_error(r#"{"vcpus": 4097}"#), "vm.vcpus");
        assert_eq!(
            vm_error(r#"{"cpu_threads_per_core": 4097}"#),
            "vm.cpu_threads_per_core"
        );
        assert_eq!(vm_error(r#"{"cpu_sockets": 0}"#), "vm.cpu_sockets");
        assert_eq!(vm_error(r#"{"disk_gib": -2}"#), "vm.disk_gib");
        assert_eq!(vm_error(r#"{"id": "a\u2066b"}"#), "vm.id");
        assert_eq!(
            vm_error(r#"{"memory_guaranteed_mib": -1}"#),
            "vm.memory_guaranteed_mib"
        );
        let ok: VmSpec = from_json(r#"{"memory_mib": 0, "vcpus": 1}"#).expect("valid");
        assert_eq!(check_vm(&ok, "vm"), Ok(()));
        let mut nan = ok.clone();
        nan.memory_mib = f64::NAN;
        assert_eq!(check_vm(&nan, "vm").unwrap_err().path, "vm.memory_mib");
    }

    /// A host with two cells and a device, `hardware` spliced in whole.
    fn hardware_host(hardware: &str) -> String {
        format!(
            r#"{{"hosts": [{{"id": "ok"}}, {{"id": "h", "hardware": {hardware},
                     "metrics": {{"memory_total_mib": 4096, "cpu_threads": 8}}}}]}}"#
        )
    }

    const CELLS: &str = r#"[{"node": 0, "memory_mib": 2048, "cpus": [0, 1, 2, 3],
                              "dedicated_cpus": [2, 3], "pinned_cpus": [3]},
                             {"node": 1, "memory_mib": 2048, "cpus": [4, 5]}]"#;

    #[test]
    fn inconsistent_host_hardware_is_refused_with_the_field() {
        let with_cells = |cells: &str| hardware_host(&format!(r#"{{"numa_cells": {cells}}}"#));
        let with_devices = |devices: &str| {
            hardware_host(&format!(
                r#"{{"numa_cells": {CELLS}, "pci_devices": {devices}}}"#
            ))
        };
        let pf = r#"{"address": "0000:5e:00.0", "vendor_id": "8086", "product_id": "1572",
                     "kind": "physical_function"}"#;
        let gpu = r#"{"address": "0000:3b:00.0", "vendor_id": "10de", "product_id": "1eb8"}"#;
        for (text, path) in [
            (
                with_cells(r#"[{"node": 0, "memory_mib": 4096}, {"node": 1, "memory_mib": 1}]"#),
                "hosts[1].hardware.numa_cells",
            ),
            (
                with_cells(r#"[{"node": 0, "cpus": [0, 1]}, {"node": 1, "cpus": [2, 1]}]"#),
                "hosts[1].hardware.numa_cells[1].cpus[1]",
            ),
            (
                with_cells(r#"[{"node": 0, "cpus": [0, 1, 2, 3, 4, 5, 6, 7, 8]}]"#),
                "hosts[1].hardware.numa_cells",
            ),
            (
                with_cells(r#"[{"node": 0, "cpus": [0, 1], "dedicated_cpus": [1, 2]}]"#),
                "hosts[1].hardware.numa_cells[0].dedicated_cpus[1]",
            ),
            (
                with_cells(
                    r#"[{"node": 0, "cpus": [0, 1], "dedicated_cpus": [1], "pinned_cpus": [0]}]"#,
                ),
                "hosts[1].hardware.numa_cells[0].pinned_cpus[0]",
            ),
            (
                with_cells(r#"[{"node": 0, "cpus": [0, 1], "siblings": [[0, 1], [2, 3]]}]"#),
                "hosts[1].hardware.numa_cells[0].siblings[1][0]",
            ),
            (
                with_cells(r#"[{"node": 0, "cpus": [0, 1], "siblings": [[0, 1], [1]]}]"#),
                "hosts[1].hardware.numa_cells[0].siblings[1][0]",
            ),
            (
                with_cells(
                    r#"[{"node": 0, "pages": [{"size_kib": 2048, "total": 4, "free": 5}]}]"#,
                ),
                "hosts[1].hardware.numa_cells[0].pages[0].free",
            ),
            (
                with_cells(r#"[{"node": 0, "memory_mib": 10, "memory_free_mib": 11}]"#),
                "hosts[1].hardware.numa_cells[0].memory_free_mib",
            ),
            (
                with_cells(r#"[{"node": 0}, {"node": 0}]"#),
                "hosts[1].hardware.numa_cells[1].node",
            ),
            (
                with_cells(r#"[{"node": 0, "distances": [10]}, {"node": 1}]"#),
                "hosts[1].hardware.numa_cells[0].distances",
            ),
            (
                with_devices(r#"[{"vendor_id": "10de", "product_id": "1eb8", "numa_node": 2}]"#),
                "hosts[1].hardware.pci_devices[0].numa_node",
            ),
            (
                with_devices(&format!(
                    r#"[{gpu}, {{"vendor_id": "8086", "product_id": "154c",
                        "kind": "virtual_function", "parent": "0000:3b:00.0"}}]"#
                )),
                "hosts[1].hardware.pci_devices[1].parent",
            ),
            (
                with_devices(&format!(
                    r#"[{pf}, {{"vendor_id": "8086", "product_id": "154c",
                        "kind": "virtual_function", "parent": "0000:5e:00.1"}}]"#
                )),
                "hosts[1].hardware.pci_devices[1].parent",
            ),
            (
                with_devices(
                    r#"[{"vendor_id": "8086", "product_id": "154c", "count": 2, "free": 3}]"#,
                ),
                "hosts[1].hardware.pci_devices[0].free",
            ),
            (
                with_devices(
                    r#"[{"address": "0000:3b:00.0", "vendor_id": "10de", "product_id": "1eb8",
                         "count": 2}]"#,
                ),
                "hosts[1].hardware.pci_devices[0].address",
            ),
            (
                hardware_host(&format!(
                    r#"{{"pci_devices": [{gpu}],
                        "mdev_types": [{{"name": "nvidia-35", "free": 1, "parent": "0000:00:00.0"}}]}}"#
                )),
                "hosts[1].hardware.mdev_types[0].parent",
            ),
        ] {
            let (got, kind) = snapshot_error(&text);
            assert_eq!(got, path, "{text}");
            // Contradictions no schema can state: 422, not 400.
            assert!(
                matches!(kind, SnapshotErrorKind::Unprocessable(_)),
                "{text}: {kind:?}"
            );
        }
        // The consistent versions pass.
        for text in [
            with_cells(CELLS),
            with_devices(&format!(
                r#"[{pf}, {gpu}, {{"vendor_id": "8086", "product_id": "154c",
                    "kind": "virtual_function", "parent": "0000:5e:00.0", "numa_node": 1,
                    "count": 8, "free": 6}}]"#
            )),
        ] {
            let snapshot: Snapshot = from_json(&text).expect("valid JSON");
            assert!(build_checked(&snapshot).is_ok(), "{text}");
        }
    }

    #[test]
    fn unknown_hardware_enum_values_name_their_path() {
        for (text, path) in [
            (
                r#"{"hosts": [{"id": "h", "hardware": {"pci_devices": [{"vendor_id": "1",
                    "product_id": "2", "kind": "type-PF"}]}}]}"#,
                "hosts[0].hardware.pci_devices[0].kind",
            ),
            (
                r#"{"hosts": [{"id": "h", "hardware": {"numa_cells": [{"node": 0, "cpu": []}]}}]}"#,
                "hosts[0].hardware.numa_cells[0].cpu",
            ),
        ] {
            let e = from_json::<Snapshot>(text).unwrap_err();
            assert_eq!(e.path, path, "{text}");
        }
        for (text, path) in [
            (r#"{"thread_policy": "isolated"}"#, "hardware.thread_policy"),
            (r#"{"cpu_policy": "pinned"}"#, "hardware.cpu_policy"),
            (r#"{"numa_tune": "loose"}"#, "hardware.numa_tune"),
            (
                r#"{"emulator_threads": "shared"}"#,
                "hardware.emulator_threads",
            ),
            (r#"{"page_size": "huge"}"#, "hardware.page_size"),
            (
                r#"{"pci_requests": [{"numa_policy": "strict"}]}"#,
                "hardware.pci_requests[0].numa_policy",
            ),
        ] {
            let e = from_json::<VmSpec>(&format!(r#"{{"hardware": {text}}}"#)).unwrap_err();
            assert_eq!(e.path, path, "{text}");
            assert!(matches!(e.kind, SnapshotErrorKind::Json(_)), "{text}");
        }
    }

    #[test]
    fn an_inconsistent_vm_hardware_request_is_refused_with_the_field() {
        for (text, path) in [
            (
                r#"{"vcpus": 2, "memory_mib": 1024, "hardware": {"numa_cells": [
                    {"shared_vcpus": [0, 2], "memory_mib": 1024}]}}"#,
                "vm.hardware.numa_cells[0].shared_vcpus[1]",
            ),
            (
                r#"{"vcpus": 2, "memory_mib": 1024, "hardware": {"numa_cells": [
                    {"shared_vcpus": [0], "memory_mib": 512},
                    {"dedicated_vcpus": [0, 1], "memory_mib": 512}]}}"#,
                "vm.hardware.numa_cells[1].dedicated_vcpus[0]",
            ),
            (
                r#"{"vcpus": 2, "memory_mib": 1024, "hardware": {"numa_cells": [
                    {"shared_vcpus": [0, 0], "memory_mib": 1024}]}}"#,
                "vm.hardware.numa_cells[0].shared_vcpus[1]",
            ),
            (
                r#"{"vcpus": 2, "memory_mib": 1024, "hardware": {"numa_cells": [
                    {"shared_vcpus": [0], "memory_mib": 512},
                    {"shared_vcpus": [1], "memory_mib": 256}]}}"#,
                "vm.hardware.numa_cells",
            ),
            (
                r#"{"vcpus": 4096, "hardware": {"cpu_policy": "dedicated",
                    "emulator_threads": "isolate"}}"#,
                "vm.hardware.cpu_policy",
            ),
            (
                r#"{"hardware": {"pci_requests": [{"count": 0}]}}"#,
                "vm.hardware.pci_requests[0].count",
            ),
            (r#"{"hardware": {"page_size": 0}}"#, "vm.hardware.page_size"),
        ] {
            assert_eq!(vm_error(text), path, "{text}");
        }
        let ok: VmSpec = from_json(
            r#"{"vcpus": 4096, "memory_mib": 2048, "hardware": {"cpu_policy": "dedicated",
                "numa_cells": [{"dedicated_vcpus": [0, 1], "memory_mib": 1024},
                               {"dedicated_vcpus": [2], "memory_mib": 1024}]}}"#,
        )
        .expect("valid");
        assert_eq!(check_vm(&ok, "vm"), Ok(()));
    }

    #[test]
    fn counts_are_one_to_the_limit() {
        assert_eq!(check_count(0).unwrap_err().path, "count");
        assert_eq!(check_count(1), Ok(()));
        assert_eq!(check_count(MAX_INSTANCES_PER_REQUEST), Ok(()));
        assert!(check_count(MAX_INSTANCES_PER_REQUEST + 1).is_err());
    }

    #[test]
    fn a_valid_snapshot_passes() {
        let snapshot: Snapshot = from_json(
            r#"{"hosts": [{"id": "h", "metrics": {"memory_free_mib": -512, "cpu_cores": 8},
                "named_metrics": {"temp": -3.5}}],
               "vms": [{"id": "v", "host": "h", "memory_mib": 512}]}"#,
        )
        .expect("valid JSON");
        assert!(build_checked(&snapshot).is_ok());
    }

    /// Every column of `inv` as text (Debug: a named metric's NaN, for a
    /// host without it, is not equal to itself).
    pub(crate) fn columns(inv: &sandpiper_model::Inventory) -> Vec<String> {
        use sandpiper_model::{CellMetric, HostFlag, HostLabels, HostMetric, HostText};
        use sandpiper_model::{PcpuFlag, VmFlag, VmMetric, VmText};
        use std::fmt::Debug;
        /// One line per case of a column kind.
        fn each<K: Debug + Copy, V: Debug>(cases: &[K], column: impl Fn(K) -> V) -> Vec<String> {
            cases
                .iter()
                .map(|&k| format!("{k:?} {:?}", column(k)))
                .collect()
        }
        let named = inv.host_named_metric_names();
        [
            vec![format!("{:?}", (inv.host_count(), inv.vm_count()))],
            each(HostMetric::ALL, |m| inv.host_metric(m)),
            each(HostFlag::ALL, |f| inv.host_flag(f)),
            vec![format!("{:?}", inv.host_statuses())],
            each(HostText::ALL, |t| inv.host_text(t)),
            each(HostLabels::ALL, |l| inv.host_labels(l)),
            each(&named.iter().map(String::as_str).collect::<Vec<_>>(), |n| {
                inv.host_named_metric(n)
            }),
            vec![format!("{:?}", inv.vm_hosts())],
            each(VmMetric::ALL, |m| inv.vm_metric(m)),
            each(VmFlag::ALL, |f| inv.vm_flag(f)),
            each(VmText::ALL, |t| inv.vm_text(t)),
            vec![format!("{:?}", inv.numa_topology())],
            each(CellMetric::ALL, |m| inv.cell_metric(m)),
            vec![format!("{:?}", inv.cell_cpus())],
            each(PcpuFlag::ALL, |f| inv.pcpu_flag(f)),
            vec![
                format!("{:?}", inv.cell_pages()),
                format!("{:?}", inv.cell_distances()),
                format!("{:?}", inv.pci_pools()),
                format!("{:?}", inv.pci_pool_labels()),
                format!("{:?}", inv.mdev_offers()),
            ],
        ]
        .concat()
    }

    /// Hosts sent inline.
    #[derive(serde::Deserialize)]
    struct Inline {
        hosts: CheckedHosts,
        #[serde(default)]
        vms: CheckedVms,
    }

    /// The hosts read one at a time build exactly the columns
    /// `build_checked` builds from the same hosts held whole: metrics,
    /// flags and named metrics each host has or lacks (padded in the
    /// middle and at the end), every text and label column, hardware, and
    /// the VMs on them.
    #[test]
    fn hosts_read_one_at_a_time_build_what_the_whole_snapshot_builds() {
        let text = format!(
            r#"{{"hosts": [
                {{"id": "a", "name": "A", "status": "maintenance", "address": "10.0.0.1",
                  "zone": "z1", "metrics": {{"memory_free_mib": -5, "cpu_cores": 8}},
                  "flags": ["spm"], "networks": ["n1", "n2"],
                  "capabilities": {{"cpu_info": "{{\"arch\": \"x86_64\"}}"}},
                  "aggregates": {{"g1": {{"ssd": "true"}}, "g2": {{}}}},
                  "named_metrics": {{"cpu.percent": 40}},
                  "instances": [{{"tenant": "t1", "instance_type": "small"}}]}},
                {{"id": "b", "zone": "z1", "metrics": {{"cpu_threads": 16}},
                  "hardware": {{"cpu_model": "Skylake", "cpu_flags": ["vmx", "avx2"],
                                "emulated_machines": ["q35"], "cluster_levels": ["4.7"],
                                "numa_cells": {CELLS}}}}},
                {{"id": "c", "address": "10.0.0.1", "flags": ["isolated", "spm"],
                  "metrics": {{"cpu_cores": 4}}, "named_metrics": {{"temp": 30}},
                  "capabilities": {{"cpu_info": "{{\"arch\": \"x86_64\"}}"}}}},
                {{"id": "d"}}
              ],
              "vms": [{{"id": "v1", "host": "c", "memory_mib": 512}},
                      {{"id": "v2", "name": "web", "host": "a", "vcpus": 2, "pending": true}}]}}"#
        );
        let whole = build_checked(&from_json::<Snapshot>(&text).expect("valid JSON"))
            .expect("a valid snapshot");
        let inline: Inline = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(inline.hosts.len(), 4);
        let read = inline.hosts.build(inline.vms).expect("valid hosts");
        assert_eq!(columns(&read.inventory), columns(&whole.inventory));
        assert_eq!(read.hosts, whole.hosts);
        // The VMs may come first: their hosts are looked up at the end.
        let (hosts, vms) = text.split_once(r#""vms""#).expect("vms after hosts");
        let vms_first = format!(
            r#"{{"vms"{}, {}}}"#,
            vms.trim_end().trim_end_matches('}'),
            hosts
                .trim_start()
                .trim_start_matches('{')
                .trim()
                .trim_end_matches(',')
        );
        let inline: Inline = serde_json::from_str(&vms_first).expect("valid JSON");
        let read = inline.hosts.build(inline.vms).expect("valid hosts");
        assert_eq!(columns(&read.inventory), columns(&whole.inventory));
        // Both paths build with the same builders, so a few columns are
        // checked against what the body says, too.
        let inv = &read.inventory;
        let cores = inv.host_metric(sandpiper_model::HostMetric::CpuCores);
        assert_eq!(cores, [8.0, 0.0, 4.0, 0.0]);
        assert_eq!(inv.vm_hosts(), [2, 0]);
        let names = inv.vm_text(sandpiper_model::VmText::Name);
        assert_eq!([names.get(0), names.get(1)], ["v1", "web"]);
        assert_eq!(inv.vm_metric(sandpiper_model::VmMetric::Vcpus), [1.0, 2.0]);
        let model = inv.host_text(sandpiper_model::HostText::CpuModel);
        assert_eq!((model.get(0), model.get(1)), ("", "Skylake"));
    }

    /// A refused host is answered as `build_checked` answers it, whatever
    /// comes after it; a body malformed after a refused host is still
    /// malformed JSON; `null` is not a list of hosts.
    #[test]
    fn a_refused_host_is_answered_after_the_whole_list_is_read() {
        for (hosts, path) in [
            (r#"[{"id": "h"}, {"id": "h"}]"#, "hosts[1].id"),
            (
                r#"[{"id": "a"}, {"id": "b", "metrics": {"cpu_cores": -1}}, {"id": ""}]"#,
                "hosts[1].metrics.cpu_cores",
            ),
            (
                r#"[{"id": "a", "metrics": {"memry_free_mib": 1}}, {"id": "b"}]"#,
                "hosts[0].metrics.memry_free_mib",
            ),
            (r#"[{"id": "a", "flags": ["spn"]}]"#, "hosts[0].flags[0]"),
            (r#"[{"id": "a"}, {"id": "\u0007"}]"#, "hosts[1].id"),
            (
                r#"[{"id": "a"}], "vms": [{"id": "v", "host": "a"}, {"id": "v", "host": "a"}]"#,
                "vms[1].id",
            ),
            (
                r#"[{"id": "a"}], "vms": [{"id": "v", "host": "a"}, {"id": "w", "host": "b"}]"#,
                "vms[1].host",
            ),
            (
                r#"[{"id": "a"}], "vms": [{"id": "v", "host": "a", "vcpus": 0}]"#,
                "vms[0].vcpus",
            ),
            (
                r#"[{"id": "a", "metrics": {"cpu_cores": -1}}], "vms": [{"id": "", "host": "a"}]"#,
                "hosts[0].metrics.cpu_cores",
            ),
        ] {
            let text = format!(r#"{{"hosts": {hosts}}}"#);
            let whole = build_checked(&from_json::<Snapshot>(&text).expect("valid JSON"))
                .map(|_| ())
                .unwrap_err();
            let inline: Inline = serde_json::from_str(&text).expect("valid JSON");
            let read = inline.hosts.build(inline.vms).map(|_| ()).unwrap_err();
            assert_eq!(read, whole, "{hosts}");
            assert_eq!(read.path, path, "{hosts}");
        }
        let malformed = r#"{"hosts": [{"id": "h"}, {"id": "h"}, {"id": "x", "colour": 1}]}"#;
        let e = serde_json::from_str::<Inline>(malformed)
            .err()
            .expect("refused");
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
        let e = serde_json::from_str::<Inline>(r#"{"hosts": null}"#)
            .err()
            .expect("refused");
        assert!(e.to_string().contains("expected a sequence"), "{e}");
    }
}
