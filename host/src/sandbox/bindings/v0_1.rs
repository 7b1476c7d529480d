//! `sandpiper:policy@0.1.0`, frozen (`wit/0.1.0/policy.wit`): served so
//! that units built against it, uploaded ones included, keep working
//! unchanged. Its conversions lower the model to what 0.1.0 can say: no
//! hardware on the VM, string tables as `list<string>`; a 0.1.0 unit's
//! reasons have no figures and it applies to every request.

wasmtime::component::bindgen!({
    path: "../wit/0.1.0",
    // The world exporting every role: its types and import are what any
    // unit sees; which exports a given unit has is read from the unit.
    world: "sandpiper:policy/full-unit",
});

use self::sandpiper::policy::inventory;
pub(crate) use self::sandpiper::policy::types;
use sandpiper_model as model;

use super::{lower_vm, same_enum};
use crate::sandbox::call_state::InventoryImport;

super::shared_conversions!();
super::guest_calls!(V0_1);

// Enums a unit sends (arguments of `inventory` functions): the 0.1.0
// cases, the first ones of each model enum.
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

fn interned(column: &model::Interned) -> types::Interned {
    types::Interned {
        values: column.values().map(str::to_owned).collect(),
        indices: column.indices.clone(),
    }
}

fn labels(column: &model::Labels) -> types::Labels {
    types::Labels {
        strings: column.strings.clone(),
        offsets: column.offsets.clone(),
        keys: column.keys.clone(),
        values: column.values.clone(),
    }
}

/// `host-statuses` as an enum list.
type StatusColumn = Vec<types::HostStatus>;
use super::status_cases as statuses;

impl inventory::Host for InventoryImport {
    super::shared_inventory!();
}

impl From<&model::Vm> for types::Vm {
    /// 0.1.0 has no `hardware`: a 0.1.0 unit never sees what 0.2.0 added.
    fn from(vm: &model::Vm) -> Self {
        lower_vm!(vm, {})
    }
}

impl From<types::Rejection> for model::Rejection {
    fn from(rejection: types::Rejection) -> Self {
        model::Rejection::new(rejection.reason, rejection.hosts)
    }
}

/// A 0.1.0 unit's info: it applies to every request.
fn unit_info(info: types::UnitInfo) -> model::UnitInfo {
    model::UnitInfo {
        name: info.name,
        description: info.description,
        params: param_specs(info.params),
        score_order: info.score_order.into(),
        applies_to: model::AppliesTo::EveryRequest,
        per_host: false,
    }
}
