//! Conversions between the WIT bindings' types and [`crate::model`]'s
//! (WebAssembly only).
//!
//! Enums convert case by case in exhaustive matches, both ways: a case added
//! to the WIT but not to the model (or the reverse, or a renamed one) stops
//! the SDK from compiling instead of shifting every later case by one.
//! Records move their fields, so no string or list is copied.

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
    HypervisorVersion,
});

bridge_enum!(HostFlag <=> HostFlag { Spm, HostedEngine, Isolated, });

bridge_enum!(HostText <=> HostText { Id, Name, Address, Zone, });

bridge_enum!(HostLabels <=> HostLabelKind {
    Networks, Capabilities, Aggregates, AggregateMetadata, Instances,
});

bridge_enum!(VmMetric <=> VmMetric {
    MemoryMib, MemoryGuaranteedMib, Vcpus, CpuUsagePercent,
});

bridge_enum!(VmFlag <=> VmFlag { Migratable, HighlyAvailable, HostedEngine, Pending, });

bridge_enum!(VmText <=> VmText { Id, Name, });

bridge_enum!(GroupScope <=> GroupScope { Vms, Hosts, });

bridge_enum!(ScoreOrder <=> ScoreOrder { LowerIsBetter, HigherIsBetter, });

impl From<wit::Interned> for model::Interned {
    fn from(value: wit::Interned) -> Self {
        model::Interned {
            values: value.values,
            indices: value.indices,
        }
    }
}

impl From<wit::Labels> for model::Labels {
    fn from(value: wit::Labels) -> Self {
        model::Labels {
            strings: value.strings,
            offsets: value.offsets,
            keys: value.keys,
            values: value.values,
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
        }
    }
}
