//! The JSON form of hardware data (issue #16): a host's NUMA cells, CPUs,
//! memory pages, PCI device pools and mediated device types, and what a VM
//! to place needs of them. Part of the one snapshot format
//! (`crate::snapshot`): `hosts[i].hardware` and `vm.hardware`, both
//! optional, absent meaning "none reported" and "no requirement".
//!
//! * this module: the serde types and the VM's conversion to
//!   [`VmHardware`];
//! * [`columns`]: the hosts' hardware as the WIT's hardware columns;
//! * [`check`]: the consistency rules (`inputs` calls them), so that
//!   inconsistent data is refused with its field's path instead of
//!   reaching a fitter;
//! * [`claim`]: the specific CPUs, pages and devices a placement took, and
//!   how they count in later decisions' columns.
//!
//! Hosts name their NUMA cells by their own node numbers (libvirt's cell
//! ids) and their devices by PCI address; the columns turn those into
//! cluster-wide cell and pool indices. A VM's `host_nodes` stay node
//! numbers, as the WIT has them.

pub mod check;
pub mod claim;
pub mod columns;

use std::collections::BTreeMap;

use sandpiper_model::KeyValue;
use sandpiper_model::hardware::{
    self as model, PageSize, PciRequest, VmHardware, VmNumaCell as ModelVmNumaCell,
};
use serde::{Deserialize, Serialize};

/// What a host reports of its hardware.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HostHardware {
    /// The CPU model as the hypervisor names it (`Skylake-Server-IBRS`).
    #[serde(default)]
    pub cpu_model: String,
    /// CPU feature flags (`vmx`, `avx512f`, `model_Skylake-Server`).
    #[serde(default)]
    pub cpu_flags: Vec<String>,
    /// Machine types the emulator supports (`pc-q35-rhel9.2.0`).
    #[serde(default)]
    pub emulated_machines: Vec<String>,
    /// Cluster compatibility levels supported (oVirt's `4.7`).
    #[serde(default)]
    pub cluster_levels: Vec<String>,
    #[serde(default)]
    pub numa_cells: Vec<NumaCell>,
    #[serde(default)]
    pub pci_devices: Vec<PciDevice>,
    #[serde(default)]
    pub mdev_types: Vec<MdevType>,
}

/// One NUMA cell of a host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NumaCell {
    /// The host's own node number; devices and VM cells name the cell by it.
    pub node: u32,
    /// The CPU socket the cell sits on; none when not reported.
    #[serde(default)]
    pub socket: Option<u32>,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub memory_mib: f64,
    /// `memory_mib` when absent.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub memory_free_mib: Option<f64>,
    /// Every CPU VMs may use (shared and dedicated), by host CPU number.
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// The CPUs of `cpus` that may be pinned (Nova's `pcpuset`).
    #[serde(default)]
    pub dedicated_cpus: Vec<u32>,
    /// The CPUs of `dedicated_cpus` pinned by a VM.
    #[serde(default)]
    pub pinned_cpus: Vec<u32>,
    /// Hardware threads of one core, a group each; a CPU in no group is a
    /// core of its own.
    #[serde(default)]
    pub siblings: Vec<Vec<u32>>,
    /// vCPUs of unpinned VMs on the cell's shared CPUs.
    #[serde(default)]
    pub shared_vcpus_used: u32,
    #[serde(default)]
    pub pages: Vec<Pages>,
    /// Distance to each cell of the host, in `numa_cells` order; may be empty.
    #[serde(default)]
    pub distances: Vec<u32>,
}

impl NumaCell {
    /// Free memory, `memory_mib` when not reported.
    pub fn memory_free(&self) -> f64 {
        self.memory_free_mib.unwrap_or(self.memory_mib)
    }
}

/// Memory pages of one size in a cell.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Pages {
    #[schema(minimum = 1)]
    pub size_kib: u32,
    pub total: u64,
    pub free: u64,
}

/// A pool of identical PCI devices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PciDevice {
    /// The PCI address (`0000:3b:00.0`), only for a pool of one device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub address: Option<String>,
    /// Vendor id, hex (`10de`).
    pub vendor_id: String,
    /// Product id, hex (`1eb8`).
    pub product_id: String,
    #[serde(default)]
    pub kind: DeviceKind,
    /// The node number of the cell the devices are attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Devices in the pool.
    #[serde(default = "one")]
    pub count: u32,
    /// Devices free; `count` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<u32>,
    /// For virtual functions: the `address` of their physical function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The pool's tags (`physical_network`), its labels towards units.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

impl PciDevice {
    /// Free devices, `count` when not reported.
    pub fn free(&self) -> u32 {
        self.free.unwrap_or(self.count)
    }
}

fn one() -> u32 {
    1
}

/// What a PCI pool holds; see `types.device-kind`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    #[default]
    Pci,
    PhysicalFunction,
    VirtualFunction,
}

impl From<DeviceKind> for model::DeviceKind {
    fn from(kind: DeviceKind) -> Self {
        match kind {
            DeviceKind::Pci => model::DeviceKind::Pci,
            DeviceKind::PhysicalFunction => model::DeviceKind::PhysicalFunction,
            DeviceKind::VirtualFunction => model::DeviceKind::VirtualFunction,
        }
    }
}

/// A mediated device type the host offers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MdevType {
    /// The type's name (`nvidia-35`).
    #[schema(min_length = 1)]
    pub name: String,
    /// Instances that can still be created.
    pub free: u32,
    /// The `address` of the parent device's pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// What the VM to place needs of a host's hardware; every field's default
/// needs nothing. See `types.vm-hardware`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VmHardwareSpec {
    /// Guest NUMA cells; empty when no topology is requested.
    #[serde(default)]
    pub numa_cells: Vec<VmNumaCell>,
    #[serde(default)]
    pub numa_tune: NumaTune,
    #[serde(default)]
    pub cpu_policy: CpuPolicy,
    #[serde(default)]
    pub thread_policy: ThreadPolicy,
    #[serde(default)]
    pub emulator_threads: EmulatorThreads,
    /// `small`, `large`, `any` or a size in KiB; absent for no requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = page_size_schema)]
    pub page_size: Option<PageSizeSpec>,
    #[serde(default)]
    pub cpu_model: String,
    #[serde(default)]
    pub required_cpu_flags: Vec<String>,
    #[serde(default)]
    pub forbidden_cpu_flags: Vec<String>,
    #[serde(default)]
    pub pci_requests: Vec<PciRequestSpec>,
    /// Mediated device types, a type repeated once per instance.
    #[serde(default)]
    pub mdev_types: Vec<String>,
    #[serde(default)]
    pub compatibility_version: String,
    #[serde(default)]
    pub machine_type: String,
    #[serde(default)]
    pub keeps_tsc_frequency: bool,
}

/// One guest NUMA cell.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VmNumaCell {
    /// Guest vCPU numbers running floating.
    #[serde(default)]
    pub shared_vcpus: Vec<u32>,
    /// Guest vCPU numbers pinned to dedicated host CPUs.
    #[serde(default)]
    pub dedicated_vcpus: Vec<u32>,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub memory_mib: f64,
    /// Host node numbers the cell must be placed on; empty when any will do.
    #[serde(default)]
    pub host_nodes: Vec<u32>,
}

/// Devices the VM needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PciRequestSpec {
    #[serde(default)]
    pub alias: String,
    #[serde(default = "one")]
    #[schema(minimum = 1)]
    pub count: u32,
    /// Acceptable device descriptions (`vendor_id`, `product_id`,
    /// `dev_type`, `address`, pool tags); a device matching every pair of
    /// any one fits.
    #[serde(default)]
    pub specs: Vec<BTreeMap<String, String>>,
    #[serde(default)]
    pub numa_policy: PciNumaPolicy,
}

/// Declares a snake_case JSON enum and its conversion to the model's.
macro_rules! json_enum {
    ($(#[$doc:meta])* $name:ident => $model:ident { $first:ident $(, $case:ident)* $(,)? }) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema,
        )]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            #[default]
            $first,
            $($case,)*
        }

        impl From<$name> for model::$model {
            fn from(value: $name) -> Self {
                match value {
                    $name::$first => model::$model::$first,
                    $($name::$case => model::$model::$case,)*
                }
            }
        }
    };
}

json_enum!(
    /// How strictly guest cells bind to host cells; see `types.numa-tune`.
    NumaTune => NumaTune { Strict, Interleave, Preferred }
);
json_enum!(
    /// How vCPUs use host CPUs; see `types.cpu-policy`.
    CpuPolicy => CpuPolicy { Shared, Dedicated, Mixed }
);
json_enum!(
    /// How pinned vCPUs treat hardware threads; see `types.thread-policy`.
    ThreadPolicy => ThreadPolicy { Prefer, Isolate, Require }
);
json_enum!(
    /// Where emulator threads run; see `types.emulator-threads`.
    EmulatorThreads => EmulatorThreads { Share, Isolate }
);
json_enum!(
    /// How a PCI request relates to NUMA cells; see `types.pci-numa-policy`.
    PciNumaPolicy => PciNumaPolicy { Legacy, Required, Preferred, Socket }
);

/// The page size a VM needs: a name or a size in KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum PageSizeSpec {
    Named(PageSizeName),
    Kib(u32),
}

/// The schema of `page_size`, as `check.rs` reads it: a name, a size of
/// at least 1 KiB (0 is refused, so the document says so), or null.
fn page_size_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
    let one_of = OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["small", "large", "any"])),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1.0))
                .maximum(Some(f64::from(u32::MAX))),
        )
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some(
            "`small`, `large`, `any` or a size in KiB; absent for no requirement.",
        ))
        .build();
    Schema::OneOf(one_of)
}

/// The named page sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PageSizeName {
    /// Small pages only.
    Small,
    /// Any huge page size, largest first.
    Large,
    /// Any size, huge pages preferred.
    Any,
}

/// The model's page size of an optional JSON one (absent: unspecified).
fn page_size(spec: Option<PageSizeSpec>) -> PageSize {
    match spec {
        None => PageSize::Unspecified,
        Some(PageSizeSpec::Named(PageSizeName::Small)) => PageSize::Small,
        Some(PageSizeSpec::Named(PageSizeName::Large)) => PageSize::Large,
        Some(PageSizeSpec::Named(PageSizeName::Any)) => PageSize::Any,
        Some(PageSizeSpec::Kib(kib)) => PageSize::Kib(kib),
    }
}

impl VmHardwareSpec {
    /// The request as units see it (`vm.hardware`).
    pub fn to_model(&self) -> VmHardware {
        VmHardware {
            numa_cells: self
                .numa_cells
                .iter()
                .map(|c| ModelVmNumaCell {
                    shared_vcpus: c.shared_vcpus.clone(),
                    dedicated_vcpus: c.dedicated_vcpus.clone(),
                    memory_mib: c.memory_mib,
                    host_nodes: c.host_nodes.clone(),
                })
                .collect(),
            numa_tune: self.numa_tune.into(),
            cpu_policy: self.cpu_policy.into(),
            thread_policy: self.thread_policy.into(),
            emulator_threads: self.emulator_threads.into(),
            page_size: page_size(self.page_size),
            cpu_model: self.cpu_model.clone(),
            required_cpu_flags: self.required_cpu_flags.clone(),
            forbidden_cpu_flags: self.forbidden_cpu_flags.clone(),
            pci_requests: self
                .pci_requests
                .iter()
                .map(|r| PciRequest {
                    alias: r.alias.clone(),
                    count: r.count,
                    specs: r
                        .specs
                        .iter()
                        .map(|spec| {
                            spec.iter()
                                .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                                .collect()
                        })
                        .collect(),
                    numa_policy: r.numa_policy.into(),
                })
                .collect(),
            mdev_types: self.mdev_types.clone(),
            compatibility_version: self.compatibility_version.clone(),
            machine_type: self.machine_type.clone(),
            keeps_tsc_frequency: self.keeps_tsc_frequency,
        }
    }
}
