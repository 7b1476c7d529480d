//! Sandpiper's data model, shared by the host and the guests: the Rust twin
//! of the WIT types in `wit/policy.wit` (`sandpiper:policy@0.3.0`, the
//! current version), the column store a unit reads ([`inventory`]), the
//! hardware data new in 0.2.0 ([`hardware`]), which requests a unit applies
//! to ([`applies`]) and rejection reasons with figures ([`reason`]).
//!
//! Older versions of the WIT (`wit/0.1.0/`, `wit/0.2.0/`) have no twin of their own: the
//! host converts them to and from these types, which hold everything every
//! version can say.
//!
//! These types compile on every target. Inside a component the guest SDK
//! (`sandpiper-guest`, which re-exports this crate as `sandpiper_guest::model`
//! and `sandpiper_guest::inventory`) fills them from the WIT bindings;
//! natively the host builds them directly, which is how the server, the
//! benchmarks and the tests run a unit's very source outside WebAssembly.
//! The crate depends on nothing but hashbrown and foldhash (its interning
//! tables) and, optionally, serde, so the host can use it without pulling
//! in anything written for guests.

pub mod codes;
pub mod fingerprint;
pub mod interning;
pub mod inventory;

pub use interning::{Interner, LabelsBuilder};
pub use inventory::{Inventory, MoreVm};

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

            /// The case's code in a column of codes (WIT 0.3.0 sends enum
            /// columns as bytes): its WIT position, what
            /// [`Self::from_code`] reads back.
            pub fn code(self) -> u8 {
                self as u8
            }

            /// The case whose code is `code`. A match on the codes rather
            /// than a lookup in [`Self::ALL`]: the codes being the
            /// discriminants, the compiler makes it one range check, so
            /// decoding a column is a check and a copy per row.
            #[allow(non_upper_case_globals, reason = "one constant per case, named as it")]
            pub fn from_code(code: u8) -> Option<Self> {
                $(const $variant: u8 = $name::$variant as u8;)*
                match code {
                    $($variant => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// A column of codes as a column of cases, in place: the codes
            /// checked a word at a time ([`codes`](crate::codes)), then
            /// the very bytes reused. `Err` holds the first code that names
            /// no case.
            pub fn column_from_codes(codes: Vec<u8>) -> Result<Vec<Self>, u8> {
                const { assert!(Self::COUNT <= 0x80) };
                if let Some(code) = $crate::codes::first_at_or_above(&codes, Self::COUNT as u8) {
                    return Err(code);
                }
                // SAFETY: the enum is `repr(u8)` with the discriminants
                // 0..COUNT (no case sets its own), and every byte was
                // checked to be below COUNT, so each is a valid case.
                Ok(unsafe { $crate::codes::cast_column(codes) })
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
    PoolColumn, ThreadPolicy, VmHardware, VmNumaCell,
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

impl HostLabels {
    /// Whether the kind is set-like: every value is "" and a unit reads
    /// the keys alone (`inventory.host-sets`, WIT 0.3.0).
    pub fn is_set(self) -> bool {
        matches!(
            self,
            HostLabels::Networks
                | HostLabels::Aggregates
                | HostLabels::CpuFlags
                | HostLabels::EmulatedMachines
                | HostLabels::ClusterLevels
        )
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

/// An interned string column: row `row`'s string is value
/// `indices[row]`, and the distinct values are kept as the WIT's `strings`
/// table: one UTF-8 text, value `i` its bytes `offsets[i]..offsets[i + 1]`.
///
/// Why one text rather than a `String` per value: a copy of the column is
/// then three copies of memory, not an allocation per value (and as many
/// frees when it is dropped). The host copies the VM columns for every
/// decision while claims are live (the claimed VMs follow the reported
/// ones), which at 10,000 hosts was 60,000 `String`s cloned and freed per
/// decision, over a third of the server's time (docs/performance.md); and
/// the table crosses into a unit as it is, with no string built per value
/// on either side.
#[derive(Clone, Debug, PartialEq)]
pub struct Interned {
    /// The distinct values, one after another.
    text: String,
    /// One more than there are values, from 0; each on a character
    /// boundary of `text`, none before the previous one.
    offsets: Vec<u32>,
    pub indices: Vec<u32>,
}

impl Default for Interned {
    fn default() -> Self {
        Interned {
            text: String::new(),
            offsets: vec![0],
            indices: Vec::new(),
        }
    }
}

/// A string table whose offsets do not fit its text: value `value`'s bytes
/// `start..end` are not a range of character boundaries of its `len` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StringsError {
    pub value: usize,
    pub start: u32,
    pub end: u32,
    pub len: usize,
}

impl std::fmt::Display for StringsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "offsets {}..{} do not fit its {} bytes",
            self.start, self.end, self.len
        )
    }
}

impl std::error::Error for StringsError {}

impl Interned {
    /// Interns `rows`, one string per row.
    pub fn from_rows<S: AsRef<str>>(rows: impl IntoIterator<Item = S>) -> Self {
        let rows = rows.into_iter();
        let mut interner = Interner::with_capacity(rows.size_hint().0);
        for row in rows {
            interner.push(row.as_ref());
        }
        interner.finish()
    }

    /// The column of `values` (in this order, not looked up for
    /// duplicates) and `indices`.
    pub fn from_values<S: AsRef<str>>(
        values: impl IntoIterator<Item = S>,
        indices: Vec<u32>,
    ) -> Self {
        let mut out = Interned {
            indices,
            ..Interned::default()
        };
        for value in values {
            out.push_value(value.as_ref());
        }
        out
    }

    /// The column of a WIT `strings` table (`text`, `offsets`) and
    /// `indices`, checked: each value must be a range of character
    /// boundaries of `text`. Empty `offsets` mean no values.
    pub fn from_parts(
        text: String,
        mut offsets: Vec<u32>,
        indices: Vec<u32>,
    ) -> Result<Self, StringsError> {
        for (value, pair) in offsets.windows(2).enumerate() {
            let (start, end) = (pair[0], pair[1]);
            if text.get(start as usize..end as usize).is_none() {
                return Err(StringsError {
                    value,
                    start,
                    end,
                    len: text.len(),
                });
            }
        }
        if offsets.is_empty() {
            offsets.push(0);
        }
        Ok(Interned {
            text,
            offsets,
            indices,
        })
    }

    /// Appends `value` to the values (without looking for it among them)
    /// and returns its position.
    pub fn push_value(&mut self, value: &str) -> u32 {
        let position = self.value_count() as u32;
        self.text.push_str(value);
        self.offsets.push(self.text.len() as u32);
        position
    }

    /// Appends a row whose string is `value`, as a new value: for a string
    /// known not to be among the values (a claimed VM's id), or where a
    /// duplicate value does not matter.
    pub fn push_new_row(&mut self, value: &str) {
        let position = self.push_value(value);
        self.indices.push(position);
    }

    /// Row `row`'s string, or "" when the row or its index is out of range.
    pub fn get(&self, row: usize) -> &str {
        self.indices
            .get(row)
            .map_or("", |&i| self.value(i as usize))
    }

    /// Value `i`, or "" when out of range.
    pub fn value(&self, i: usize) -> &str {
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(&start), Some(&end)) => self.text.get(start as usize..end as usize).unwrap_or(""),
            _ => "",
        }
    }

    /// Number of distinct values.
    pub fn value_count(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The values, in order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.value_count()).map(|i| self.value(i))
    }

    /// The values' text, one after another (the WIT's `strings.text`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Where each value starts in [`Interned::text`], and where the last
    /// ends (the WIT's `strings.offsets`).
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }
}

/// The serialized form is the values as strings and the indices, as before
/// the values became one text.
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename = "Interned")]
struct InternedRows {
    values: Vec<String>,
    indices: Vec<u32>,
}

#[cfg(feature = "serde")]
impl serde::Serialize for Interned {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        InternedRows {
            values: self.values().map(str::to_owned).collect(),
            indices: self.indices.clone(),
        }
        .serialize(serializer)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Interned {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let rows = InternedRows::deserialize(deserializer)?;
        Ok(Interned::from_values(rows.values, rows.indices))
    }
}

/// A multi-valued key/value column in compressed-row form; see `types.labels`.
///
/// A set-like column read as a set (`types.sets`, WIT 0.3.0) has keys and
/// no values: `values` is empty, and a row read as pairs gives each key the
/// value id [`hardware::NONE`], whose string is "" as every value of a set
/// is. Not sending the values is the point: at 10,000 hosts of ~60 CPU
/// flags they were 2.4 MB crossing into the unit per call. Reading a set
/// by its keys ([`Labels::keys_of`], what `HostSets` does) makes nothing;
/// reading it as pairs makes its value ids once, on the first such read,
/// so that the pairs' own path stays what it was: a per-pair check there
/// cost the aggregate filters' native builds up to 40 %.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Labels {
    pub strings: Vec<String>,
    pub offsets: Vec<u32>,
    pub keys: Vec<u32>,
    /// Per pair, the value's id; empty in a set (see the type's doc).
    pub values: Vec<u32>,
    /// A set's value ids, all NONE, made on its first read as pairs.
    #[cfg_attr(feature = "serde", serde(skip))]
    set_values: SetValues,
}

/// [`Labels::set_values`]: derived data, so equal whatever it holds.
///
/// Behind an `Arc`, not inline: a cell inside `Labels` itself makes
/// `&Labels` a reference to something mutable, so the compiler reloads
/// the column's fields at every step of a unit's loop over hosts. Inline,
/// it cost the `Network` filter 12 % sandboxed (109-114 -> 122-131 us,
/// `catalog network`), which reads no pairs at all.
#[derive(Clone, Debug, Default)]
struct SetValues(std::sync::Arc<std::sync::OnceLock<Vec<u32>>>);

impl PartialEq for SetValues {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Labels {
    /// Builds the column from each row's pairs.
    pub fn from_rows<K, V, R>(rows: impl IntoIterator<Item = R>) -> Self
    where
        K: AsRef<str>,
        V: AsRef<str>,
        R: IntoIterator<Item = (K, V)>,
    {
        let mut builder = LabelsBuilder::default();
        for row in rows {
            builder.push_row(row);
        }
        builder.finish()
    }

    /// Number of rows the column describes.
    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Row `row`'s pairs; empty when the row is out of range or malformed.
    pub fn row(&self, row: usize) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.id_pairs(row)
            .map(|(key, value)| (self.string(key), self.string(value)))
    }

    /// The id of `text` in the string table; none when no row uses it.
    /// Units look a string up once and then compare ids per row.
    pub fn id(&self, text: &str) -> Option<u32> {
        let index = self.strings.iter().position(|s| s == text)?;
        u32::try_from(index).ok()
    }

    /// Per string id, whether its string passes `test`: for judging each
    /// distinct string once rather than each row's.
    pub fn ids_where(&self, test: impl Fn(&str) -> bool) -> Vec<bool> {
        self.strings.iter().map(|s| test(s)).collect()
    }

    /// The string with id `id` ("" for an id outside the table).
    #[inline]
    pub fn string(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", String::as_str)
    }

    /// A column of pairs: per pair, its key's and value's ids into
    /// `strings`, rows cut by `offsets`.
    pub fn new(strings: Vec<String>, offsets: Vec<u32>, keys: Vec<u32>, values: Vec<u32>) -> Self {
        Labels {
            strings,
            offsets,
            keys,
            values,
            set_values: SetValues::default(),
        }
    }

    /// A column read as a set: keys without values (see the type's doc).
    pub fn set(strings: Vec<String>, offsets: Vec<u32>, keys: Vec<u32>) -> Self {
        Labels::new(strings, offsets, keys, Vec::new())
    }

    /// Whether the column is a set: keys without values (see the type's
    /// doc).
    pub fn is_set(&self) -> bool {
        self.values.is_empty() && !self.keys.is_empty()
    }

    /// Row `row`'s key ids and value ids, as two slices of one length;
    /// both empty when the row is out of range or malformed.
    ///
    /// Cut once per row, so a loop over a row reads no field of the
    /// column per pair (in the sandbox each such read went through memory).
    ///
    /// Not [`hardware::row_range`]: its `start <= end` select, on every
    /// row, cost the aggregate filters' native builds 8-17 % (`nova_units
    /// aggregate`, session 52); a reversed row fails `get` here anyway.
    #[inline]
    fn row_ids(&self, row: usize) -> (&[u32], &[u32]) {
        let start = self.offsets.get(row).copied().unwrap_or(0) as usize;
        let end = self.offsets.get(row + 1).copied().unwrap_or(0) as usize;
        match (self.keys.get(start..end), self.values.get(start..end)) {
            (Some(keys), Some(values)) => (keys, values),
            // A set, or a malformed row: out of line, off the pairs' path.
            _ => self.set_row_ids(start, end),
        }
    }

    /// [`Labels::row_ids`] of a set (its value ids all NONE, made once),
    /// or of a malformed row (both empty).
    #[cold]
    #[inline(never)]
    fn set_row_ids(&self, start: usize, end: usize) -> (&[u32], &[u32]) {
        if !self.is_set() {
            return (&[], &[]);
        }
        let values = (self.set_values.0).get_or_init(|| vec![hardware::NONE; self.keys.len()]);
        match (self.keys.get(start..end), values.get(start..end)) {
            (Some(keys), Some(values)) => (keys, values),
            _ => (&[], &[]),
        }
    }

    /// Row `row`'s key ids, in order (a set's members); empty when the
    /// row is out of range.
    #[inline]
    pub fn keys_of(&self, row: usize) -> &[u32] {
        let start = self.offsets.get(row).copied().unwrap_or(0) as usize;
        let end = self.offsets.get(row + 1).copied().unwrap_or(0) as usize;
        self.keys.get(start..end).unwrap_or(&[])
    }

    /// Row `row`'s (key id, value id) pairs, in order; in a set every
    /// value id is [`hardware::NONE`].
    #[inline]
    pub fn id_pairs(&self, row: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let (keys, values) = self.row_ids(row);
        keys.iter().copied().zip(values.iter().copied())
    }

    /// The value ids row `row` has for key id `key`, in order.
    #[inline]
    pub fn values_of(&self, row: usize, key: u32) -> impl Iterator<Item = u32> + '_ {
        self.id_pairs(row)
            .filter_map(move |(k, v)| (k == key).then_some(v))
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
    /// Whether the unit judges each host on its own, so that its answers
    /// for unchanged hosts may be reused (see `unit-info.per-host`; new in
    /// WIT 0.2.0).
    #[cfg_attr(feature = "serde", serde(default))]
    pub per_host: bool,
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
            per_host: false,
        }
    }

    /// Says the unit judges each host on its own: its answer for a host
    /// depends only on that host and the request (apart from the VM's id and
    /// name), so the host may reuse it while neither changes (see
    /// `unit-info.per-host` for the whole promise).
    pub fn per_host(mut self) -> Self {
        self.per_host = true;
        self
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_enum_code_reads_back_as_its_case_and_nothing_else_does() {
        for &status in HostStatus::ALL {
            assert_eq!(HostStatus::from_code(status.code()), Some(status));
            assert_eq!(usize::from(status.code()), status as usize);
        }
        for &kind in DeviceKind::ALL {
            assert_eq!(DeviceKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(HostStatus::from_code(HostStatus::COUNT as u8), None);
        assert_eq!(DeviceKind::from_code(u8::MAX), None);
    }

    #[test]
    fn a_column_of_codes_becomes_its_cases_or_names_the_first_bad_code() {
        let codes: Vec<u8> = (0..21).map(|i| i % HostStatus::COUNT as u8).collect();
        let cases: Vec<HostStatus> = codes.iter().map(|&c| HostStatus::ALL[c as usize]).collect();
        assert_eq!(HostStatus::column_from_codes(codes.clone()), Ok(cases));
        let mut bad = codes;
        bad[17] = HostStatus::COUNT as u8;
        bad[19] = u8::MAX;
        assert_eq!(
            HostStatus::column_from_codes(bad),
            Err(HostStatus::COUNT as u8)
        );
        assert_eq!(HostStatus::column_from_codes(Vec::new()), Ok(Vec::new()));
    }

    #[test]
    fn an_interned_column_keeps_each_value_once_in_one_text() {
        let mut column = Interned::from_rows(["b", "a", "b", "ç"]);
        assert_eq!(column.indices, [0, 1, 0, 2]);
        assert_eq!(column.values().collect::<Vec<_>>(), ["b", "a", "ç"]);
        assert_eq!(
            (column.text(), column.offsets()),
            ("baç", &[0, 1, 2, 4][..])
        );
        assert_eq!(
            (column.get(2), column.get(3), column.get(4)),
            ("b", "ç", "")
        );
        // A copy extended with a new row leaves the original as it was.
        let copy = column.clone();
        column.push_new_row("new");
        assert_eq!((column.get(4), column.value_count()), ("new", 4));
        assert_eq!((copy.get(4), copy.value_count()), ("", 3));
        // An index past the values reads as "".
        column.indices.push(9);
        assert_eq!(column.get(5), "");
    }

    #[test]
    fn a_string_table_whose_offsets_do_not_fit_its_text_is_refused() {
        let ok = Interned::from_parts("abç".to_owned(), vec![0, 1, 4], vec![1, 0]);
        assert_eq!(ok.map(|c| c.get(0).to_owned()), Ok("bç".to_owned()));
        for offsets in [vec![0, 5], vec![2, 1], vec![0, 3]] {
            let column = Interned::from_parts("abç".to_owned(), offsets, Vec::new());
            assert!(column.is_err(), "{column:?}");
        }
        let none = Interned::from_parts(String::new(), Vec::new(), Vec::new());
        assert_eq!(none, Ok(Interned::default()));
    }

    #[test]
    fn a_labels_column_is_read_by_string_id() {
        let labels = Labels::from_rows([vec![("k", "1"), ("x", "y"), ("k", "2")], vec![]]);
        let k = labels.id("k").unwrap();
        let values: Vec<&str> = labels.values_of(0, k).map(|v| labels.string(v)).collect();
        assert_eq!(values, ["1", "2"]);
        assert_eq!(labels.values_of(1, k).count(), 0);
        assert_eq!(labels.id("nope"), None);
        assert_eq!(labels.string(99), "");
        let ones: Vec<bool> = labels.ids_where(|s| s == "1");
        assert_eq!(ones.iter().filter(|&&yes| yes).count(), 1);
        assert!(ones[labels.id("1").unwrap() as usize]);
        // Out of range, or offsets past the ids: an empty row.
        assert_eq!(labels.id_pairs(9).count(), 0);
        let mut broken = labels.clone();
        broken.values.pop();
        assert_eq!(broken.row_ids(0), (&[][..], &[][..]));
        assert_eq!(broken.row(0).count(), 0);
    }

    #[test]
    fn a_set_reads_as_its_pairs_with_empty_values() {
        let pairs = Labels::from_rows([vec![("vmx", ""), ("avx", "")], vec![], vec![("vmx", "")]]);
        let set = Labels::set(
            pairs.strings.clone(),
            pairs.offsets.clone(),
            pairs.keys.clone(),
        );
        assert!(set.is_set() && !pairs.is_set());
        for row in 0..4 {
            assert_eq!(set.keys_of(row), pairs.keys_of(row));
            assert!(set.row(row).eq(pairs.row(row)), "row {row}");
            assert!(set.id_pairs(row).all(|(_, value)| value == hardware::NONE));
        }
        let vmx = set.id("vmx").unwrap();
        assert_eq!(
            set.values_of(2, vmx)
                .map(|v| set.string(v))
                .collect::<Vec<_>>(),
            [""]
        );
        assert!(!Labels::default().is_set());
    }
}
