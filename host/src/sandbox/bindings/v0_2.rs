//! The host side of the WIT contract: `bindgen!` over `wit/`, the
//! `sandpiper:policy/inventory` import served from the call's snapshot, and
//! conversions between the generated types and `sandpiper_model`.

use std::sync::Arc;

use sandpiper_model as model;
use sandpiper_model::Inventory;

wasmtime::component::bindgen!({
    path: "../wit",
    // The world exporting every role: its types and import are what any
    // unit sees; which exports a given unit has is read from the unit.
    world: "sandpiper:policy/full-unit",
});

pub(crate) use self::exports::sandpiper::policy::{balance, filter, metadata, score};
pub(crate) use self::sandpiper::policy::{inventory, types};

/// The `inventory` import of one call: reads the call's snapshot.
///
/// Columns are copied out of the shared snapshot for each request the unit
/// makes (the bindings take owned lists); a unit fetches each column at most
/// once per call (the SDK caches them), so this is one copy per column read.
pub(crate) struct InventoryImport {
    inventory: Arc<Inventory>,
}

impl InventoryImport {
    pub(crate) fn new(inventory: Arc<Inventory>) -> Self {
        InventoryImport { inventory }
    }
}

/// A count as the WIT's `u32`. Snapshots are far smaller than 4 billion
/// rows; saturating keeps an impossible one from wrapping.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl inventory::Host for InventoryImport {
    fn host_count(&mut self) -> u32 {
        count(self.inventory.host_count())
    }

    fn host_metrics(&mut self, metric: types::HostMetric) -> Vec<f64> {
        self.inventory.host_metric(metric.into()).to_vec()
    }

    fn host_statuses(&mut self) -> Vec<types::HostStatus> {
        self.inventory
            .host_statuses()
            .iter()
            .map(|&s| s.into())
            .collect()
    }

    fn host_flags(&mut self, flag: types::HostFlag) -> Vec<u8> {
        flag_bytes(self.inventory.host_flag(flag.into()))
    }

    fn host_texts(&mut self, text: types::HostText) -> types::Interned {
        interned(self.inventory.host_text(text.into()))
    }

    fn host_labels(&mut self, kind: types::HostLabelKind) -> types::Labels {
        let labels = self.inventory.host_labels(kind.into());
        types::Labels {
            strings: labels.strings.clone(),
            offsets: labels.offsets.clone(),
            keys: labels.keys.clone(),
            values: labels.values.clone(),
        }
    }

    fn host_named_metric(&mut self, name: String) -> Vec<f64> {
        self.inventory.host_named_metric(&name).to_vec()
    }

    fn vm_count(&mut self) -> u32 {
        count(self.inventory.vm_count())
    }

    fn vm_hosts(&mut self) -> Vec<u32> {
        self.inventory.vm_hosts().to_vec()
    }

    fn vm_metrics(&mut self, metric: types::VmMetric) -> Vec<f64> {
        self.inventory.vm_metric(metric.into()).to_vec()
    }

    fn vm_flags(&mut self, flag: types::VmFlag) -> Vec<u8> {
        flag_bytes(self.inventory.vm_flag(flag.into()))
    }

    fn vm_texts(&mut self, text: types::VmText) -> types::Interned {
        interned(self.inventory.vm_text(text.into()))
    }
}

/// A yes/no column as the WIT sends it: one byte per row, 1 or 0 (a
/// `list<u8>` crosses in one copy, a `list<bool>` value by value).
fn flag_bytes(column: &[bool]) -> Vec<u8> {
    column.iter().map(|&flag| u8::from(flag)).collect()
}

fn interned(column: &model::Interned) -> types::Interned {
    types::Interned {
        values: column.values.clone(),
        indices: column.indices.clone(),
    }
}

/// `From` between a generated enum and its `model` twin, case by case: the
/// compiler checks both lists are complete, so the two cannot drift.
macro_rules! same_enum {
    ($from:ty => $to:ty { $($case:ident),+ $(,)? }) => {
        impl From<$from> for $to {
            fn from(value: $from) -> Self {
                match value {
                    $(<$from>::$case => <$to>::$case,)+
                }
            }
        }
    };
}

// Enums a unit sends (arguments of `inventory` functions, its own info).
same_enum!(types::HostMetric => model::HostMetric {
    CpuSockets, CpuCores, CpuThreads, CpuUsagePercent, CpuPendingPercent,
    CpuOverloadedMinutes, VcpusUsed, VcpusPending, MemoryTotalMib, MemoryFreeMib,
    MemoryPendingMib, MemoryCommittedMib, MemoryReservedMib, SwapTotalMib, SwapFreeMib,
    VmCount, VmPendingCount, DiskTotalGib, DiskFreeGib, IoOps, BuildFailures, HaScore,
    HypervisorVersion,
});
same_enum!(types::HostFlag => model::HostFlag { Spm, HostedEngine, Isolated });
same_enum!(types::HostText => model::HostText { Id, Name, Address, Zone });
same_enum!(types::HostLabelKind => model::HostLabels {
    Networks, Capabilities, Aggregates, AggregateMetadata, Instances,
});
same_enum!(types::VmMetric => model::VmMetric {
    MemoryMib, MemoryGuaranteedMib, Vcpus, CpuUsagePercent,
});
same_enum!(types::VmFlag => model::VmFlag { Migratable, HighlyAvailable, HostedEngine, Pending });
same_enum!(types::VmText => model::VmText { Id, Name });
same_enum!(types::ScoreOrder => model::ScoreOrder { LowerIsBetter, HigherIsBetter });

// Enums the host sends.
same_enum!(model::HostStatus => types::HostStatus {
    Up, Disabled, Maintenance, Down, NonOperational,
});
same_enum!(model::GroupScope => types::GroupScope { Vms, Hosts });

fn key_values(pairs: &[model::KeyValue]) -> Vec<types::KeyValue> {
    pairs
        .iter()
        .map(|kv| types::KeyValue {
            key: kv.key.clone(),
            value: kv.value.clone(),
        })
        .collect()
}

impl From<&model::VmGroup> for types::VmGroup {
    fn from(group: &model::VmGroup) -> Self {
        types::VmGroup {
            id: group.id.clone(),
            name: group.name.clone(),
            scope: group.scope.into(),
            positive: group.positive,
            enforcing: group.enforcing,
            priority: group.priority,
            hosts: group.hosts.clone(),
        }
    }
}

impl From<&model::Vm> for types::Vm {
    fn from(vm: &model::Vm) -> Self {
        types::Vm {
            id: vm.id.clone(),
            name: vm.name.clone(),
            memory_mib: vm.memory_mib,
            memory_guaranteed_mib: vm.memory_guaranteed_mib,
            vcpus: vm.vcpus,
            cpu_sockets: vm.cpu_sockets,
            cpu_cores_per_socket: vm.cpu_cores_per_socket,
            cpu_threads_per_core: vm.cpu_threads_per_core,
            cpu_usage_percent: vm.cpu_usage_percent,
            disk_gib: vm.disk_gib,
            current_host: vm.current_host,
            dedicated_hosts: vm.dedicated_hosts.clone(),
            pinned: vm.pinned,
            networks: vm.networks.clone(),
            extra_specs: key_values(&vm.extra_specs),
            image_properties: key_values(&vm.image_properties),
            tenant: vm.tenant.clone(),
            instance_type: vm.instance_type.clone(),
            highly_available: vm.highly_available,
            hosted_engine: vm.hosted_engine,
            groups: vm.groups.iter().map(types::VmGroup::from).collect(),
        }
    }
}

impl From<&model::Request> for types::Request {
    fn from(request: &model::Request) -> Self {
        types::Request {
            vm: (&request.vm).into(),
            params: key_values(&request.params),
            hints: key_values(&request.hints),
        }
    }
}

impl From<&model::BalanceRequest> for types::BalanceRequest {
    fn from(request: &model::BalanceRequest) -> Self {
        types::BalanceRequest {
            params: key_values(&request.params),
            candidates: request.candidates.clone(),
        }
    }
}

impl From<types::Rejection> for model::Rejection {
    fn from(rejection: types::Rejection) -> Self {
        model::Rejection {
            reason: rejection.reason,
            hosts: rejection.hosts,
        }
    }
}

impl From<types::Scores> for model::Scores {
    fn from(scores: types::Scores) -> Self {
        model::Scores {
            values: scores.values,
            floor: scores.floor,
            ceiling: scores.ceiling,
        }
    }
}

impl From<types::Migration> for model::Migration {
    fn from(migration: types::Migration) -> Self {
        model::Migration {
            vm: migration.vm,
            destinations: migration.destinations,
        }
    }
}

impl From<types::UnitInfo> for model::UnitInfo {
    fn from(info: types::UnitInfo) -> Self {
        model::UnitInfo {
            name: info.name,
            description: info.description,
            params: info
                .params
                .into_iter()
                .map(|p| model::ParamSpec {
                    name: p.name,
                    description: p.description,
                    default_value: p.default_value,
                    pattern: p.pattern,
                })
                .collect(),
            score_order: info.score_order.into(),
        }
    }
}

/// `types` has no functions; the linker still needs an instance for it.
impl types::Host for InventoryImport {}
