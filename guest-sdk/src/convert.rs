//! Conversions between the WIT bindings' types and [`crate::model`]'s
//! (WebAssembly only).
//!
//! Enums convert case by case in exhaustive matches, both ways: a case added
//! to the WIT but not to the model (or the reverse, or a renamed one) stops
//! the SDK from compiling instead of shifting every later case by one.
//! Records move their fields, so no list is copied; a string table (one
//! text plus offsets on the wire) is split into the model's strings once,
//! inside the unit.

use crate::bindings::types as wit;
use crate::model;

/// `From` both ways between a model enum and its WIT twin.
macro_rules! bridge_enum {
    ($model:ident <=> $wit:ident { $($case:ident,)* }) => {
        impl From<model::$model> for wit::$wit {
            fn from(value: model::$model) -> Self {
                match value { $(model::$model::$case => wit::$wit::$case,)* }
            }
        }

        impl From<wit::$wit> for model::$model {
            fn from(value: wit::$wit) -> Self {
                match value { $(wit::$wit::$case => model::$model::$case,)* }
            }
        }
    };
}

bridge_enum!(HostStatus <=> HostStatus {
    Up, Disabled, Maintenance, Down, NonOperational,
});

bridge_enum!(HostMetric <=> HostMetric {
    CpuSockets, CpuCores, CpuThreads, CpuUsagePercent, CpuPendingPercent,
    CpuOverloadedMinutes, VcpusUsed, VcpusPending, MemoryTotalMib, MemoryFreeMib,
    MemoryPendingMib, MemoryCommittedMib, MemoryReservedMib, SwapTotalMib, SwapFreeMib,
    VmCount, VmPendingCount, DiskTotalGib, DiskFreeGib, IoOps, BuildFailures, HaScore,
    HypervisorVersion, TscFrequencyHz,
});

bridge_enum!(HostFlag <=> HostFlag { Spm, HostedEngine, Isolated, TscScaling, });

bridge_enum!(HostText <=> HostText { Id, Name, Address, Zone, CpuModel, });

bridge_enum!(HostLabels <=> HostLabelKind {
    Networks, Capabilities, Aggregates, AggregateMetadata, Instances, CpuFlags,
    EmulatedMachines, ClusterLevels,
});

bridge_enum!(CellMetric <=> CellMetric {
    MemoryTotalMib, MemoryFreeMib, Cpus, DedicatedCpus, PinnedCpus, SharedVcpusUsed,
});

bridge_enum!(PcpuFlag <=> PcpuFlag { Dedicated, Pinned, });

bridge_enum!(DeviceKind <=> DeviceKind { Pci, PhysicalFunction, VirtualFunction, });

/// One way: the WIT's `kinds` column has no model twin (see
/// [`model::PoolColumn`]).
impl From<model::PoolColumn> for wit::PoolColumn {
    fn from(value: model::PoolColumn) -> Self {
        use model::PoolColumn as M;
        use wit::PoolColumn as W;
        match value {
            M::Vendors => W::Vendors,
            M::Products => W::Products,
            M::Addresses => W::Addresses,
            M::Cells => W::Cells,
            M::Parents => W::Parents,
            M::Total => W::Total,
            M::Free => W::Free,
        }
    }
}

bridge_enum!(CpuPolicy <=> CpuPolicy { Shared, Dedicated, Mixed, });

bridge_enum!(ThreadPolicy <=> ThreadPolicy { Prefer, Isolate, Require, });

bridge_enum!(EmulatorThreads <=> EmulatorThreads { Share, Isolate, });

bridge_enum!(NumaTune <=> NumaTune { Strict, Interleave, Preferred, });

bridge_enum!(PciNumaPolicy <=> PciNumaPolicy { Legacy, Required, Preferred, Socket, });

bridge_enum!(VmMetric <=> VmMetric {
    MemoryMib, MemoryGuaranteedMib, Vcpus, CpuUsagePercent,
});

bridge_enum!(VmFlag <=> VmFlag { Migratable, HighlyAvailable, HostedEngine, Pending, });

bridge_enum!(VmText <=> VmText { Id, Name, });

bridge_enum!(GroupScope <=> GroupScope { Vms, Hosts, });

bridge_enum!(ScoreOrder <=> ScoreOrder { LowerIsBetter, HigherIsBetter, });

/// A string table's strings. A table that is not UTF-8, or whose offsets
/// do not fit its text, is a broken host: the call traps (see `imports`).
pub(crate) fn strings(table: wit::Strings) -> Vec<String> {
    let text = match String::from_utf8(table.text) {
        Ok(text) => text,
        Err(error) => panic!("the host sent a string table that is not UTF-8: {error}"),
    };
    table
        .offsets
        .windows(2)
        .map(|pair| match text.get(pair[0] as usize..pair[1] as usize) {
            Some(s) => s.to_owned(),
            None => panic!(
                "the host sent a string table whose offsets {}..{} do not fit its {} bytes",
                pair[0],
                pair[1],
                text.len()
            ),
        })
        .collect()
}

impl From<wit::Interned> for model::Interned {
    fn from(value: wit::Interned) -> Self {
        // The table is taken as it is: no string is built per value.
        let text = match String::from_utf8(value.values.text) {
            Ok(text) => text,
            Err(error) => panic!("the host sent a string table that is not UTF-8: {error}"),
        };
        match model::Interned::from_parts(text, value.values.offsets, value.indices) {
            Ok(column) => column,
            Err(error) => panic!("the host sent a string table whose {error}"),
        }
    }
}

impl From<wit::Labels> for model::Labels {
    fn from(value: wit::Labels) -> Self {
        model::Labels::new(
            strings(value.strings),
            value.offsets,
            value.keys,
            value.values,
        )
    }
}

/// A set-like column read as a set: keys without values (see
/// [`model::Labels`]).
impl From<wit::Sets> for model::Labels {
    fn from(value: wit::Sets) -> Self {
        model::Labels::set(strings(value.strings), value.offsets, value.members)
    }
}

impl From<wit::NumaTopology> for model::NumaTopology {
    fn from(value: wit::NumaTopology) -> Self {
        model::NumaTopology {
            offsets: value.offsets,
            node_ids: value.node_ids,
            sockets: value.sockets,
        }
    }
}

impl From<wit::CellCpus> for model::CellCpus {
    fn from(value: wit::CellCpus) -> Self {
        model::CellCpus {
            offsets: value.offsets,
            cpus: value.cpus,
            cores: value.cores,
        }
    }
}

impl From<wit::CellPages> for model::CellPages {
    fn from(value: wit::CellPages) -> Self {
        model::CellPages {
            offsets: value.offsets,
            size_kib: value.size_kib,
            total: value.total,
            free: value.free,
        }
    }
}

impl From<wit::CellDistances> for model::CellDistances {
    fn from(value: wit::CellDistances) -> Self {
        model::CellDistances {
            offsets: value.offsets,
            values: value.values,
        }
    }
}

impl From<wit::MdevOffers> for model::MdevOffers {
    fn from(value: wit::MdevOffers) -> Self {
        model::MdevOffers {
            offsets: value.offsets,
            strings: strings(value.strings),
            names: value.names,
            free: value.free,
            pools: value.pools,
        }
    }
}

impl From<wit::PageSize> for model::PageSize {
    fn from(value: wit::PageSize) -> Self {
        match value {
            wit::PageSize::Unspecified => model::PageSize::Unspecified,
            wit::PageSize::Small => model::PageSize::Small,
            wit::PageSize::Large => model::PageSize::Large,
            wit::PageSize::Any => model::PageSize::Any,
            wit::PageSize::Kib(kib) => model::PageSize::Kib(kib),
        }
    }
}

impl From<wit::VmNumaCell> for model::VmNumaCell {
    fn from(value: wit::VmNumaCell) -> Self {
        model::VmNumaCell {
            shared_vcpus: value.shared_vcpus,
            dedicated_vcpus: value.dedicated_vcpus,
            memory_mib: value.memory_mib,
            host_nodes: value.host_nodes,
        }
    }
}

impl From<wit::PciRequest> for model::PciRequest {
    fn from(value: wit::PciRequest) -> Self {
        model::PciRequest {
            alias: value.alias,
            count: value.count,
            specs: value.specs.into_iter().map(key_values).collect(),
            numa_policy: value.numa_policy.into(),
        }
    }
}

impl From<wit::VmHardware> for model::VmHardware {
    fn from(value: wit::VmHardware) -> Self {
        model::VmHardware {
            numa_cells: value.numa_cells.into_iter().map(Into::into).collect(),
            numa_tune: value.numa_tune.into(),
            cpu_policy: value.cpu_policy.into(),
            thread_policy: value.thread_policy.into(),
            emulator_threads: value.emulator_threads.into(),
            page_size: value.page_size.into(),
            cpu_model: value.cpu_model,
            required_cpu_flags: value.required_cpu_flags,
            forbidden_cpu_flags: value.forbidden_cpu_flags,
            pci_requests: value.pci_requests.into_iter().map(Into::into).collect(),
            mdev_types: value.mdev_types,
            compatibility_version: value.compatibility_version,
            machine_type: value.machine_type,
            keeps_tsc_frequency: value.keeps_tsc_frequency,
        }
    }
}

impl From<wit::KeyValue> for model::KeyValue {
    fn from(value: wit::KeyValue) -> Self {
        model::KeyValue {
            key: value.key,
            value: value.value,
        }
    }
}

fn key_values(list: Vec<wit::KeyValue>) -> Vec<model::KeyValue> {
    list.into_iter().map(Into::into).collect()
}

impl From<wit::VmGroup> for model::VmGroup {
    fn from(value: wit::VmGroup) -> Self {
        model::VmGroup {
            id: value.id,
            name: value.name,
            scope: value.scope.into(),
            positive: value.positive,
            enforcing: value.enforcing,
            priority: value.priority,
            hosts: value.hosts,
        }
    }
}

impl From<wit::Vm> for model::Vm {
    fn from(value: wit::Vm) -> Self {
        model::Vm {
            id: value.id,
            name: value.name,
            memory_mib: value.memory_mib,
            memory_guaranteed_mib: value.memory_guaranteed_mib,
            vcpus: value.vcpus,
            cpu_sockets: value.cpu_sockets,
            cpu_cores_per_socket: value.cpu_cores_per_socket,
            cpu_threads_per_core: value.cpu_threads_per_core,
            cpu_usage_percent: value.cpu_usage_percent,
            disk_gib: value.disk_gib,
            current_host: value.current_host,
            dedicated_hosts: value.dedicated_hosts,
            pinned: value.pinned,
            networks: value.networks,
            extra_specs: key_values(value.extra_specs),
            image_properties: key_values(value.image_properties),
            tenant: value.tenant,
            instance_type: value.instance_type,
            highly_available: value.highly_available,
            hosted_engine: value.hosted_engine,
            groups: value.groups.into_iter().map(Into::into).collect(),
            hardware: value.hardware.into(),
        }
    }
}

impl From<wit::Request> for model::Request {
    fn from(value: wit::Request) -> Self {
        model::Request {
            vm: value.vm.into(),
            params: key_values(value.params),
            hints: key_values(value.hints),
        }
    }
}

impl From<wit::BalanceRequest> for model::BalanceRequest {
    fn from(value: wit::BalanceRequest) -> Self {
        model::BalanceRequest {
            params: key_values(value.params),
            candidates: value.candidates,
        }
    }
}

impl From<model::Rejection> for wit::Rejection {
    fn from(value: model::Rejection) -> Self {
        wit::Rejection {
            reason: value.reason,
            hosts: value.hosts,
            figures: value.figures,
        }
    }
}

impl From<model::Scores> for wit::Scores {
    fn from(value: model::Scores) -> Self {
        wit::Scores {
            values: value.values,
            floor: value.floor,
            ceiling: value.ceiling,
        }
    }
}

impl From<model::Migration> for wit::Migration {
    fn from(value: model::Migration) -> Self {
        wit::Migration {
            vm: value.vm,
            destinations: value.destinations,
        }
    }
}

impl From<model::ParamSpec> for wit::ParamSpec {
    fn from(value: model::ParamSpec) -> Self {
        wit::ParamSpec {
            name: value.name,
            description: value.description,
            default_value: value.default_value,
            pattern: value.pattern,
        }
    }
}

impl From<model::UnitInfo> for wit::UnitInfo {
    fn from(value: model::UnitInfo) -> Self {
        wit::UnitInfo {
            name: value.name,
            description: value.description,
            params: value.params.into_iter().map(Into::into).collect(),
            score_order: value.score_order.into(),
            applies_to: value.applies_to.into(),
            per_host: value.per_host,
        }
    }
}

impl From<model::RequestProperty> for wit::RequestProperty {
    fn from(value: model::RequestProperty) -> Self {
        use model::RequestProperty as M;
        use wit::RequestProperty as W;
        match value {
            M::CurrentHost => W::CurrentHost,
            M::DedicatedHosts => W::DedicatedHosts,
            M::Groups => W::Groups,
            M::Networks => W::Networks,
            M::HighlyAvailable => W::HighlyAvailable,
            M::HostedEngine => W::HostedEngine,
            M::Hint(key) => W::Hint(key),
            M::ExtraSpec(prefix) => W::ExtraSpec(prefix),
            M::ImageProperty(key) => W::ImageProperty(key),
            M::NumaTopology => W::NumaTopology,
            M::CpuPinning => W::CpuPinning,
            M::PageSize => W::PageSize,
            M::CpuModel => W::CpuModel,
            M::CpuFlags => W::CpuFlags,
            M::PciDevices => W::PciDevices,
            M::MdevTypes => W::MdevTypes,
            M::CompatibilityVersion => W::CompatibilityVersion,
            M::MachineType => W::MachineType,
            M::TscFrequency => W::TscFrequency,
            M::Param(name) => W::Param(name),
        }
    }
}

impl From<model::AppliesTo> for wit::AppliesTo {
    fn from(value: model::AppliesTo) -> Self {
        match value {
            model::AppliesTo::EveryRequest => wit::AppliesTo::EveryRequest,
            model::AppliesTo::RequestsWith(properties) => {
                wit::AppliesTo::RequestsWith(properties.into_iter().map(Into::into).collect())
            }
        }
    }
}
