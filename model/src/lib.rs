//! Sandpiper's data model, shared by the host and the guests: the Rust twin
//! of the WIT types in `wit/policy.wit` (`sandpiper:policy@0.2.0`, the
//! current version), the column store a unit reads ([`inventory`]), the
//! hardware data new in 0.2.0 ([`hardware`]), which requests a unit applies
//! to ([`applies`]) and rejection reasons with figures ([`reason`]).
//!
//! Older versions of the WIT (`wit/0.1.0/`) have no twin of their own: the
//! host converts them to and from these types, which hold everything every
//! version can say.
//!
//! These types compile on every target. Inside a component the guest SDK
//! (`sandpiper-guest`, which re-exports this crate as `sandpiper_guest::model`
//! and `sandpiper_guest::inventory`) fills them from the WIT bindings;
//! natively the host builds them directly, which is how the server, the
//! benchmarks and the tests run a unit's very source outside WebAssembly.
//! The crate depends on nothing but (optionally) serde, so the host can use
//! it without pulling in anything written for guests.

pub mod inventory;

pub use inventory::Inventory;

/// Declares a fieldless enum that mirrors a WIT enum, in the same order (the
/// bindings' discriminants index `ALL`), with its WIT case names.
macro_rules! wit_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wit:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
        #[repr(u8)]
        pub enum $name { $($(#[$vmeta])* $variant,)* }

        impl $name {
            /// Every case, in WIT order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            /// Number of cases.
            pub const COUNT: usize = Self::ALL.len();

            /// The case's name as spelled in the WIT file.
            pub fn wit_name(self) -> &'static str {
                match self { $($name::$variant => $wit,)* }
            }

            /// The case whose WIT name is `name`.
            pub fn from_wit_name(name: &str) -> Option<Self> {
                match name { $($wit => Some($name::$variant),)* _ => None }
            }

            /// The case at WIT position `index` (a binding's discriminant).
            pub fn from_index(index: usize) -> Option<Self> {
                Self::ALL.get(index).copied()
            }
        }
    };
}

pub mod applies;
pub mod hardware;
pub mod reason;

pub use applies::{AppliesTo, RequestProperty};
pub use hardware::{
    CellCpus, CellDistances, CellMetric, CellPages, CpuPolicy, DeviceKind, EmulatorThreads,
    MdevOffers, NumaTopology, NumaTune, PageSize, PciNumaPolicy, PciPools, PciRequest, PcpuFlag,
    ThreadPolicy, VmHardware, VmNumaCell,
};

wit_enum! {
    /// Lifecycle state of a host. See `types.host-status` in the WIT.
    HostStatus {
        Up = "up",
        Disabled = "disabled",
        Maintenance = "maintenance",
        Down = "down",
        NonOperational = "non-operational",
    }
}

#[expect(
    clippy::derivable_impls,
    reason = "declared by wit_enum!, which derives no Default"
)]
impl Default for HostStatus {
    fn default() -> Self {
        HostStatus::Up
    }
}

wit_enum! {
    /// Numeric per-host columns. See `types.host-metric` in the WIT: usage
    /// columns include pending placements.
    HostMetric {
        CpuSockets = "cpu-sockets",
        CpuCores = "cpu-cores",
        CpuThreads = "cpu-threads",
        CpuUsagePercent = "cpu-usage-percent",
        CpuPendingPercent = "cpu-pending-percent",
        CpuOverloadedMinutes = "cpu-overloaded-minutes",
        VcpusUsed = "vcpus-used",
        VcpusPending = "vcpus-pending",
        MemoryTotalMib = "memory-total-mib",
        MemoryFreeMib = "memory-free-mib",
        MemoryPendingMib = "memory-pending-mib",
        MemoryCommittedMib = "memory-committed-mib",
        MemoryReservedMib = "memory-reserved-mib",
        SwapTotalMib = "swap-total-mib",
        SwapFreeMib = "swap-free-mib",
        VmCount = "vm-count",
        VmPendingCount = "vm-pending-count",
        DiskTotalGib = "disk-total-gib",
        DiskFreeGib = "disk-free-gib",
        IoOps = "io-ops",
        BuildFailures = "build-failures",
        HaScore = "ha-score",
        HypervisorVersion = "hypervisor-version",
        TscFrequencyHz = "tsc-frequency-hz",
    }
}

wit_enum! {
    /// Boolean per-host columns. See `types.host-flag` in the WIT.
    HostFlag {
        Spm = "spm",
        HostedEngine = "hosted-engine",
        Isolated = "isolated",
        TscScaling = "tsc-scaling",
    }
}

wit_enum! {
    /// String per-host columns. See `types.host-text` in the WIT.
    HostText {
        Id = "id",
        Name = "name",
        Address = "address",
        Zone = "zone",
        CpuModel = "cpu-model",
    }
}

wit_enum! {
    /// Key/value per-host columns. See `types.host-label-kind` in the WIT.
    HostLabels {
        Networks = "networks",
        Capabilities = "capabilities",
        Aggregates = "aggregates",
        AggregateMetadata = "aggregate-metadata",
        Instances = "instances",
        CpuFlags = "cpu-flags",
        EmulatedMachines = "emulated-machines",
        ClusterLevels = "cluster-levels",
    }
}

wit_enum! {
    /// Numeric columns about running VMs. See `types.vm-metric` in the WIT.
    VmMetric {
        MemoryMib = "memory-mib",
        MemoryGuaranteedMib = "memory-guaranteed-mib",
        Vcpus = "vcpus",
        CpuUsagePercent = "cpu-usage-percent",
    }
}

wit_enum! {
    /// Boolean columns about running VMs. See `types.vm-flag` in the WIT.
    VmFlag {
        Migratable = "migratable",
        HighlyAvailable = "highly-available",
        HostedEngine = "hosted-engine",
        Pending = "pending",
    }
}

wit_enum! {
    /// String columns about running VMs. See `types.vm-text` in the WIT.
    VmText {
        Id = "id",
        Name = "name",
    }
}

wit_enum! {
    /// What a group constrains placement against. See `types.group-scope`.
    GroupScope {
        Vms = "vms",
        Hosts = "hosts",
    }
}

wit_enum! {
    /// Which end of a score is better. See `types.score-order`.
    ScoreOrder {
        LowerIsBetter = "lower-is-better",
        HigherIsBetter = "higher-is-better",
    }
}

#[expect(
    clippy::derivable_impls,
    reason = "declared by wit_enum!, which derives no Default"
)]
impl Default for ScoreOrder {
    fn default() -> Self {
        ScoreOrder::LowerIsBetter
    }
}

/// An interned string column: `values[indices[row]]` is row's string.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Interned {
    pub values: Vec<String>,
    pub indices: Vec<u32>,
}

impl Interned {
    /// Interns `rows`, one string per row.
    pub fn from_rows<S: AsRef<str>>(rows: impl IntoIterator<Item = S>) -> Self {
        let mut positions = std::collections::HashMap::<String, u32>::new();
        let mut out = Interned::default();
        for row in rows {
            let row = row.as_ref();
            let index = match positions.get(row) {
                Some(&i) => i,
                None => {
                    let i = out.values.len() as u32;
                    positions.insert(row.to_owned(), i);
                    out.values.push(row.to_owned());
                    i
                }
            };
            out.indices.push(index);
        }
        out
    }

    /// Row `row`'s string, or "" when the row or its index is out of range.
    pub fn get(&self, row: usize) -> &str {
        self.indices
            .get(row)
            .and_then(|&i| self.values.get(i as usize))
            .map_or("", String::as_str)
    }
}

/// A multi-valued key/value column in compressed-row form; see `types.labels`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Labels {
    pub strings: Vec<String>,
    pub offsets: Vec<u32>,
    pub keys: Vec<u32>,
    pub values: Vec<u32>,
}

impl Labels {
    /// Builds the column from each row's pairs.
    pub fn from_rows<K, V, R>(rows: impl IntoIterator<Item = R>) -> Self
    where
        K: AsRef<str>,
        V: AsRef<str>,
        R: IntoIterator<Item = (K, V)>,
    {
        let mut positions = std::collections::HashMap::<String, u32>::new();
        let mut out = Labels {
            offsets: vec![0],
            ..Labels::default()
        };
        let mut intern = |s: &str, strings: &mut Vec<String>| -> u32 {
            if let Some(&i) = positions.get(s) {
                return i;
            }
            let i = strings.len() as u32;
            positions.insert(s.to_owned(), i);
            strings.push(s.to_owned());
            i
        };
        for row in rows {
            for (k, v) in row {
                let k = intern(k.as_ref(), &mut out.strings);
                let v = intern(v.as_ref(), &mut out.strings);
                out.keys.push(k);
                out.values.push(v);
            }
            out.offsets.push(out.keys.len() as u32);
        }
        out
    }

    /// Number of rows the column describes.
    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Row `row`'s pairs; empty when the row is out of range or malformed.
    pub fn row(&self, row: usize) -> impl Iterator<Item = (&str, &str)> + '_ {
        let start = self.offsets.get(row).copied().unwrap_or(0) as usize;
        let end = self.offsets.get(row + 1).copied().unwrap_or(0) as usize;
        let range = if start <= end && end <= self.keys.len() && end <= self.values.len() {
            start..end
        } else {
            0..0
        };
        range.map(move |i| {
            let text = |j: u32| self.strings.get(j as usize).map_or("", String::as_str);
            (text(self.keys[i]), text(self.values[i]))
        })
    }
}

/// A string pair: parameter, extra spec, image property or hint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KeyValue {
    pub key: String,
    pub value: String,
}

impl KeyValue {
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
        KeyValue {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// An affinity group the VM belongs to; see `types.vm-group`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct VmGroup {
    pub id: String,
    pub name: String,
    pub scope: GroupScope,
    pub positive: bool,
    pub enforcing: bool,
    pub priority: f64,
    pub hosts: Vec<u32>,
}

impl Default for VmGroup {
    fn default() -> Self {
        VmGroup {
            id: String::new(),
            name: String::new(),
            scope: GroupScope::Vms,
            positive: true,
            enforcing: true,
            priority: 1.0,
            hosts: Vec::new(),
        }
    }
}

/// The VM being placed; see `types.vm`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct Vm {
    pub id: String,
    pub name: String,
    pub memory_mib: f64,
    pub memory_guaranteed_mib: f64,
    pub vcpus: u32,
    pub cpu_sockets: u32,
    pub cpu_cores_per_socket: u32,
    pub cpu_threads_per_core: u32,
    pub cpu_usage_percent: Option<f64>,
    pub disk_gib: f64,
    pub current_host: Option<u32>,
    pub dedicated_hosts: Vec<u32>,
    pub pinned: bool,
    pub networks: Vec<String>,
    pub extra_specs: Vec<KeyValue>,
    pub image_properties: Vec<KeyValue>,
    pub tenant: String,
    pub instance_type: String,
    pub highly_available: bool,
    pub hosted_engine: bool,
    pub groups: Vec<VmGroup>,
    /// What the VM needs of the host's hardware (new in WIT 0.2.0); the
    /// default needs nothing.
    pub hardware: VmHardware,
}

impl Default for Vm {
    fn default() -> Self {
        Vm {
            id: String::new(),
            name: String::new(),
            memory_mib: 0.0,
            memory_guaranteed_mib: 0.0,
            vcpus: 1,
            cpu_sockets: 1,
            cpu_cores_per_socket: 1,
            cpu_threads_per_core: 1,
            cpu_usage_percent: None,
            disk_gib: 0.0,
            current_host: None,
            dedicated_hosts: Vec::new(),
            pinned: false,
            networks: Vec::new(),
            extra_specs: Vec::new(),
            image_properties: Vec::new(),
            tenant: String::new(),
            instance_type: String::new(),
            highly_available: false,
            hosted_engine: false,
            groups: Vec::new(),
            hardware: VmHardware::default(),
        }
    }
}

/// One call's input besides the candidates; see `types.request`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, rename_all = "kebab-case"))]
pub struct Request {
    pub vm: Vm,
    pub params: Vec<KeyValue>,
    pub hints: Vec<KeyValue>,
}

/// Hosts a filter rejected for one reason; see `types.rejection`. With
/// `figures`, `reason` is a template ([`reason`] renders it).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Rejection {
    pub reason: String,
    pub hosts: Vec<u32>,
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub figures: Vec<f64>,
}

impl Rejection {
    /// Hosts rejected for one plain sentence.
    pub fn new(reason: impl Into<String>, hosts: Vec<u32>) -> Self {
        Rejection {
            reason: reason.into(),
            hosts,
            figures: Vec::new(),
        }
    }
}

/// A score unit's answer; see `types.scores`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Scores {
    pub values: Vec<f64>,
    pub floor: Option<f64>,
    pub ceiling: Option<f64>,
}

impl Scores {
    /// Scores with no clamping.
    pub fn new(values: Vec<f64>) -> Self {
        Scores {
            values,
            floor: None,
            ceiling: None,
        }
    }
}

/// A balance unit's input besides the inventory; see `types.balance-request`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BalanceRequest {
    pub params: Vec<KeyValue>,
    pub candidates: Vec<u32>,
}

/// A proposed migration; see `types.migration`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Migration {
    pub vm: u32,
    pub destinations: Vec<u32>,
}

/// A parameter a unit accepts; see `types.param-spec`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub struct ParamSpec {
    pub name: String,
    pub description: String,
    pub default_value: String,
    pub pattern: String,
}

/// What a unit says about itself; see `types.unit-info`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub struct UnitInfo {
    pub name: String,
    pub description: String,
    pub params: Vec<ParamSpec>,
    pub score_order: ScoreOrder,
    /// Which requests the unit has something to say about (new in WIT
    /// 0.2.0; a 0.1.0 unit applies to every request).
    #[cfg_attr(feature = "serde", serde(default))]
    pub applies_to: AppliesTo,
}

impl ParamSpec {
    /// A parameter declaration; `pattern` is matched against the whole value.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        default_value: impl Into<String>,
        pattern: impl Into<String>,
    ) -> Self {
        ParamSpec {
            name: name.into(),
            description: description.into(),
            default_value: default_value.into(),
            pattern: pattern.into(),
        }
    }
}

impl UnitInfo {
    /// A unit with no parameters whose scores (if any) are costs.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        UnitInfo {
            name: name.into(),
            description: description.into(),
            params: Vec::new(),
            score_order: ScoreOrder::LowerIsBetter,
            applies_to: AppliesTo::EveryRequest,
        }
    }

    /// Says the unit has something to say only about requests with at
    /// least one of `properties` (see [`AppliesTo::RequestsWith`]).
    pub fn applies_to(mut self, properties: impl IntoIterator<Item = RequestProperty>) -> Self {
        self.applies_to = AppliesTo::RequestsWith(properties.into_iter().collect());
        self
    }

    /// Adds a parameter declaration.
    pub fn with_param(mut self, param: ParamSpec) -> Self {
        self.params.push(param);
        self
    }

    /// Says which end of this unit's scores is better.
    pub fn with_score_order(mut self, order: ScoreOrder) -> Self {
        self.score_order = order;
        self
    }

    /// The declared parameter called `name`.
    pub fn param(&self, name: &str) -> Option<&ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }
}
