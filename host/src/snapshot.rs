//! The JSON shape of a cluster snapshot and of the VM to place: the one
//! format the HTTP API (inline hosts), unit-case fixture files and
//! `sandpiper unit test` share.
//!
//! Hosts and VMs are named by their engine ids here; [`Snapshot::build`]
//! turns the snapshot into the column store units read ([`Inventory`]) plus
//! the id → index map ([`HostIndex`]) used to translate request fields such
//! as `current_host` and candidate lists. Every field name is snake_case,
//! metric and flag names are the WIT case names with `_` for `-`, unknown
//! fields are refused, and every error names the path of the offending
//! field (`hosts[3].metrics.memry_free_mib: unknown metric ...`).
//!
//! Metrics are taken as given: nothing is derived from the VM list, so a
//! snapshot says exactly what the engine reported.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::hardware::{HostHardware, VmHardwareSpec};
use sandpiper_model::Inventory;
use sandpiper_model::inventory::ColumnLengthError;
use sandpiper_model::{
    GroupScope, HostFlag, HostLabels, HostMetric, HostStatus, HostText, Interner, KeyValue,
    LabelsBuilder, Vm, VmFlag, VmGroup, VmMetric, VmText,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A cluster: its hosts and the VMs running (or pending) on them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    #[serde(default)]
    pub hosts: Vec<Host>,
    #[serde(default)]
    pub vms: Vec<RunningVm>,
}

/// The most vCPUs, sockets, cores per socket or threads per core a VM may
/// have: KVM's own ceiling (`KVM_MAX_NR_VCPUS` is 4096 on x86-64), far above
/// any real VM, and what the OpenAPI document states as `maximum` (the
/// `#[schema]` attributes below repeat it as a literal).
pub const MAX_CPUS: u32 = 4096;

/// Host metrics that may be negative: free memory and free disk after an
/// engine's overcommit. Nova computes `free_ram_mb` and `free_disk_gb` as
/// total minus used, which goes below zero on an oversubscribed host (its
/// RAM and disk weighers and filters are tested with such hosts; see
/// `policies/nova-ram/cases/nova_tests.json`), and oVirt's free memory
/// does the same past its overcommit (`policies/memory/cases/memory.json`).
/// Refusing them would refuse the whole report of an overcommitted cluster.
/// Every other metric (totals, counts, percentages, versions) is refused
/// when negative.
pub const MAY_BE_NEGATIVE: &[&str] = &["memory_free_mib", "disk_free_gib"];

/// The schema of a host's `metrics`: numbers, not negative but for
/// [`MAY_BE_NEGATIVE`], as `inputs::check_host` checks them.
pub fn metrics_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
    let number = || ObjectBuilder::new().schema_type(Type::Number);
    let not_negative = Schema::Object(number().minimum(Some(0.0)).build());
    MAY_BE_NEGATIVE
        .iter()
        .fold(
            ObjectBuilder::new().schema_type(Type::Object),
            |schema, name| schema.property(*name, number()),
        )
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(not_negative))))
        .build()
}

/// One host. Only `id` is required.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Engine identity, unique in the snapshot.
    #[schema(schema_with = crate::names::id_schema, required = true)]
    pub id: String,
    /// Display name; the id when absent.
    #[serde(default)]
    #[schema(schema_with = crate::names::optional_name_schema)]
    pub name: Option<String>,
    #[serde(default)]
    pub status: Status,
    /// Management address; hosts sharing one are the same machine.
    #[serde(default)]
    pub address: String,
    /// Availability zone, empty when none.
    #[serde(default)]
    pub zone: String,
    /// Numeric columns by WIT `host-metric` name with `_` (`memory_free_mib`);
    /// absent metrics read as 0.
    #[serde(default)]
    #[schema(schema_with = metrics_schema)]
    pub metrics: BTreeMap<String, f64>,
    /// WIT `host-flag` names with `_` (`spm`, `hosted_engine`, `isolated`).
    #[serde(default)]
    pub flags: Vec<String>,
    /// Networks the host is attached to.
    #[serde(default)]
    pub networks: Vec<String>,
    /// Capabilities and properties (`cpu_info:arch`, `hypervisor_type`).
    #[serde(default)]
    pub capabilities: BTreeMap<String, String>,
    /// Aggregates (host groups) the host belongs to, with their metadata.
    #[serde(default)]
    pub aggregates: BTreeMap<String, BTreeMap<String, String>>,
    /// Engine-defined metrics by name (Nova's metrics).
    #[serde(default)]
    pub named_metrics: BTreeMap<String, f64>,
    /// Instances known on the host, for tenant and type isolation.
    #[serde(default)]
    pub instances: Vec<Instance>,
    /// NUMA cells, CPUs, memory pages, PCI and mediated devices, CPU model
    /// and flags; absent when none are reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<Box<HostHardware>>,
}

/// A host's lifecycle state; see `types.host-status` in the WIT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Up,
    Disabled,
    Maintenance,
    Down,
    NonOperational,
}

impl From<Status> for HostStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::Up => HostStatus::Up,
            Status::Disabled => HostStatus::Disabled,
            Status::Maintenance => HostStatus::Maintenance,
            Status::Down => HostStatus::Down,
            Status::NonOperational => HostStatus::NonOperational,
        }
    }
}

/// An instance known on a host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    #[serde(default)]
    pub tenant: String,
    #[serde(default)]
    pub instance_type: String,
}

/// A VM running (or pending) on a host of the snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunningVm {
    /// Engine identity, unique in the snapshot.
    #[schema(schema_with = crate::names::id_schema, required = true)]
    pub id: String,
    /// Display name; the id when absent.
    #[serde(default)]
    #[schema(schema_with = crate::names::optional_name_schema)]
    pub name: Option<String>,
    /// Id of the host it runs on.
    pub host: String,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub memory_mib: f64,
    /// Guaranteed memory; `memory_mib` when absent.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub memory_guaranteed_mib: Option<f64>,
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 4096)]
    pub vcpus: u32,
    /// CPU usage in percent of the VM's own vCPUs.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub cpu_usage_percent: f64,
    #[serde(default = "yes")]
    pub migratable: bool,
    #[serde(default)]
    pub highly_available: bool,
    #[serde(default)]
    pub hosted_engine: bool,
    /// A placement decided but not yet reported back by the engine.
    #[serde(default)]
    pub pending: bool,
}

/// A running VM's fields as its columns keep them, borrowed: a
/// [`RunningVm`]'s ([`RunningVm::row`]) or one row of a compact body's VM
/// columns (`crate::arrow_snapshot`), so both are checked and built by
/// the same code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VmRow<'a> {
    pub id: &'a str,
    pub name: Option<&'a str>,
    pub host: &'a str,
    pub memory_mib: f64,
    pub memory_guaranteed_mib: Option<f64>,
    pub vcpus: u32,
    pub cpu_usage_percent: f64,
    pub migratable: bool,
    pub highly_available: bool,
    pub hosted_engine: bool,
    pub pending: bool,
}

impl RunningVm {
    /// Its fields, borrowed.
    pub fn row(&self) -> VmRow<'_> {
        VmRow {
            id: &self.id,
            name: self.name.as_deref(),
            host: &self.host,
            memory_mib: self.memory_mib,
            memory_guaranteed_mib: self.memory_guaranteed_mib,
            vcpus: self.vcpus,
            cpu_usage_percent: self.cpu_usage_percent,
            migratable: self.migratable,
            highly_available: self.highly_available,
            hosted_engine: self.hosted_engine,
            pending: self.pending,
        }
    }

    /// The running VM as a placement request: a migration from its host.
    /// Only what the report carries is set; the rest takes the request's
    /// defaults.
    pub fn to_migration(&self) -> VmSpec {
        VmSpec {
            id: self.id.clone(),
            name: self.name.clone(),
            memory_mib: self.memory_mib,
            memory_guaranteed_mib: self.memory_guaranteed_mib,
            vcpus: self.vcpus,
            cpu_usage_percent: Some(self.cpu_usage_percent),
            current_host: Some(self.host.clone()),
            highly_available: self.highly_available,
            hosted_engine: self.hosted_engine,
            ..VmSpec::default()
        }
    }
}

/// The VM to place. Everything is optional; see each field for its default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    /// Empty for a dry run of a VM that has none yet.
    #[serde(default)]
    #[schema(schema_with = crate::names::optional_id_schema)]
    pub id: String,
    /// Display name; the id when absent.
    #[serde(default)]
    #[schema(schema_with = crate::names::optional_name_schema)]
    pub name: Option<String>,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub memory_mib: f64,
    /// Guaranteed memory; `memory_mib` when absent (oVirt's default).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub memory_guaranteed_mib: Option<f64>,
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 4096)]
    pub vcpus: u32,
    /// Sockets; `vcpus` when absent (one core of one thread per socket, as
    /// oVirt lays out a VM by default).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 4096)]
    pub cpu_sockets: Option<u32>,
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 4096)]
    pub cpu_cores_per_socket: u32,
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 4096)]
    pub cpu_threads_per_core: u32,
    /// Measured CPU usage, for a running VM.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub cpu_usage_percent: Option<f64>,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub disk_gib: f64,
    /// Id of the host it runs on now (a migration); absent for a new start.
    #[serde(default)]
    pub current_host: Option<String>,
    /// Ids of the hosts the VM is dedicated to.
    #[serde(default)]
    pub dedicated_hosts: Vec<String>,
    /// Only `dedicated_hosts` may run it.
    #[serde(default)]
    pub pinned: bool,
    #[serde(default)]
    pub networks: Vec<String>,
    /// Required capabilities (flavor extra specs) with their operators.
    #[serde(default)]
    pub extra_specs: BTreeMap<String, String>,
    #[serde(default)]
    pub image_properties: BTreeMap<String, String>,
    #[serde(default)]
    pub tenant: String,
    #[serde(default)]
    pub instance_type: String,
    #[serde(default)]
    pub highly_available: bool,
    #[serde(default)]
    pub hosted_engine: bool,
    #[serde(default)]
    pub groups: Vec<Group>,
    /// What the VM needs of the host's hardware (NUMA cells, pinning, page
    /// size, devices, CPU model and flags); absent for nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<VmHardwareSpec>,
}

impl Default for VmSpec {
    fn default() -> Self {
        VmSpec {
            id: String::new(),
            name: None,
            memory_mib: 0.0,
            memory_guaranteed_mib: None,
            vcpus: 1,
            cpu_sockets: None,
            cpu_cores_per_socket: 1,
            cpu_threads_per_core: 1,
            cpu_usage_percent: None,
            disk_gib: 0.0,
            current_host: None,
            dedicated_hosts: Vec::new(),
            pinned: false,
            networks: Vec::new(),
            extra_specs: BTreeMap::new(),
            image_properties: BTreeMap::new(),
            tenant: String::new(),
            instance_type: String::new(),
            highly_available: false,
            hosted_engine: false,
            groups: Vec::new(),
            hardware: None,
        }
    }
}

/// An affinity group the VM to place belongs to; see `types.vm-group`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Group {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub scope: Scope,
    /// Affinity (true, the default) or anti-affinity.
    #[serde(default = "yes")]
    pub positive: bool,
    /// A hard rule (true, the default) or a soft preference.
    #[serde(default = "yes")]
    pub enforcing: bool,
    #[serde(default = "one_f64")]
    pub priority: f64,
    /// Host ids: where the other members run (`vms`), or the member hosts
    /// (`hosts`).
    #[serde(default)]
    pub hosts: Vec<String>,
}

/// What a group constrains placement against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    #[default]
    Vms,
    Hosts,
}

/// Scheduler hints by key: one value or a list (a list-valued hint repeats
/// its key towards units).
pub type Hints = BTreeMap<String, HintValue>;

/// A hint's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum HintValue {
    One(String),
    Many(Vec<String>),
}

/// Hints as the key/value pairs units receive, a list repeating its key.
pub fn hint_pairs(hints: &Hints) -> Vec<KeyValue> {
    let mut pairs = Vec::new();
    for (key, value) in hints {
        match value {
            HintValue::One(v) => pairs.push(KeyValue::new(key.clone(), v.clone())),
            HintValue::Many(vs) => {
                pairs.extend(vs.iter().map(|v| KeyValue::new(key.clone(), v.clone())));
            }
        }
    }
    pairs
}

fn one() -> u32 {
    1
}

fn one_f64() -> f64 {
    1.0
}

fn yes() -> bool {
    true
}

/// A snapshot or request that cannot be used, with the path of the field at
/// fault (`hosts[3].metrics.memry_free_mib`, `vm.current_host`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {kind}")]
pub struct SnapshotError {
    pub path: String,
    pub kind: SnapshotErrorKind,
}

/// What is wrong with the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SnapshotErrorKind {
    /// Not valid JSON for the shape, or an unknown field.
    #[error("{0}")]
    Json(String),
    #[error("unknown metric (expected a WIT host-metric name with `_`, e.g. memory_free_mib)")]
    UnknownMetric,
    #[error("unknown flag \"{0}\" (expected spm, hosted_engine or isolated)")]
    UnknownFlag(String),
    #[error("unknown host \"{0}\"")]
    UnknownHost(String),
    #[error("duplicate host id \"{0}\"")]
    DuplicateHost(String),
    #[error("duplicate VM id \"{0}\"")]
    DuplicateVm(String),
    #[error("empty id")]
    EmptyId,
    /// Well-formed but unacceptable: a negative figure, zero vCPUs, an id
    /// with control characters (`crate::inputs`). The API answers 400
    /// `invalid_value`.
    #[error("{0}")]
    InvalidValue(String),
    /// Schema-valid but refused for what it means, which no schema can
    /// say: values that contradict one another (hardware: a pinned CPU that
    /// is not dedicated, a device on a NUMA node the host lacks). The API
    /// answers 422 `invalid_snapshot` naming the field (400 is for what the
    /// OpenAPI document already rules out).
    #[error("{0}")]
    Unprocessable(String),
    /// Text (an id) not in Unicode NFC: schema-valid, since no pattern can
    /// say NFC, so 422 `text_not_nfc` naming the field.
    #[error("{0}")]
    NotNfc(String),
    #[error("{count} entries, more than an index can address")]
    TooMany { count: usize },
    /// A column came out with the wrong length: a bug in this module.
    #[error("{0}")]
    Column(#[from] ColumnLengthError),
}

impl SnapshotError {
    fn at(path: impl fmt::Display, kind: SnapshotErrorKind) -> Self {
        SnapshotError {
            path: path.to_string(),
            kind,
        }
    }
}

/// Reads an optional list that may be left out (`#[serde(default,
/// deserialize_with = "list_not_null")]` makes that `None`) but not sent as
/// `null`: the documents say the field is an array, and `null` would be a
/// second, undocumented spelling of "absent".
pub fn list_not_null<'de, D, L>(deserializer: D) -> Result<Option<L>, D::Error>
where
    D: serde::Deserializer<'de>,
    L: Deserialize<'de>,
{
    L::deserialize(deserializer).map(Some)
}

/// Parses any JSON document of this module's shapes, naming the path of
/// the first offending field in the error.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, SnapshotError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        SnapshotError {
            path: if path == "." { "$".to_owned() } else { path },
            kind: SnapshotErrorKind::Json(e.into_inner().to_string()),
        }
    })
}

/// Host ids and their indices in a snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostIndex {
    ids: Vec<String>,
    by_id: HashMap<String, u32>,
    lists: ResolvedLists,
}

/// The maps keyed by host ids and names: foldhash, seeded per map, hashes
/// ids several times faster than the standard library's SipHash, which
/// was most of resolving 30,000 VMs' hosts in a 10,000-host snapshot
/// (docs/performance.md, "Inline hosts read one at a time").
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Lists of at least this many host ids are kept once resolved
/// ([`ResolvedLists`]); shorter ones cost little to look up again.
const KEPT_LIST_MIN_IDS: usize = 64;

/// Long lists kept per index.
const KEPT_LISTS: usize = 8;

/// The last long host id lists an index resolved, with their indices.
///
/// Why: an engine sends a server group's member hosts with every request
/// of a stream (Nova's benchmark: 2,800 of them). Looking each id up in a
/// 10,000-host map is a cache miss or two per id (8.4 % of the server's
/// samples in the held phase of `nova_http 10000`); comparing the list
/// with one kept is a sequential pass over both. A list that differs in
/// any id is looked up afresh.
#[derive(Default)]
struct ResolvedLists(Mutex<VecDeque<KeptList>>);

/// A resolved list as kept: its ids as one text (so keeping a list costs
/// two copies, not one allocation per id), where each id ends in it, and
/// their indices.
struct KeptList {
    text: String,
    ends: Vec<usize>,
    indices: Vec<u32>,
}

impl KeptList {
    fn new(ids: &[String], indices: &[u32]) -> KeptList {
        let mut ends = Vec::with_capacity(ids.len());
        let text = ids.iter().fold(String::new(), |mut text, id| {
            text.push_str(id);
            ends.push(text.len());
            text
        });
        KeptList {
            text,
            ends,
            indices: indices.to_vec(),
        }
    }

    /// Whether these are the kept ids, in the same order.
    fn is(&self, ids: &[String]) -> bool {
        self.ends.len() == ids.len()
            && ids
                .iter()
                .zip(&self.ends)
                .try_fold(0, |start, (id, &end)| {
                    (self.text.get(start..end) == Some(id.as_str())).then_some(end)
                })
                .is_some()
    }
}

impl ResolvedLists {
    fn find(&self, ids: &[String]) -> Option<Vec<u32>> {
        let lists = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lists
            .iter()
            .find(|kept| kept.is(ids))
            .map(|kept| kept.indices.clone())
    }

    fn keep(&self, ids: &[String], indices: &[u32]) {
        let kept = KeptList::new(ids, indices);
        let mut lists = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lists.len() == KEPT_LISTS {
            lists.pop_front();
        }
        lists.push_back(kept);
    }
}

/// A copy of an index starts with nothing kept.
impl Clone for ResolvedLists {
    fn clone(&self) -> Self {
        ResolvedLists::default()
    }
}

/// What is kept never changes what an index answers.
impl PartialEq for ResolvedLists {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ResolvedLists {}

impl fmt::Debug for ResolvedLists {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResolvedLists")
    }
}

impl HostIndex {
    /// An index with room for `hosts` hosts.
    pub fn with_capacity(hosts: usize) -> Self {
        HostIndex {
            ids: Vec::with_capacity(hosts),
            by_id: HashMap::with_capacity_and_hasher(hosts, Default::default()),
            lists: ResolvedLists::default(),
        }
    }

    /// Adds host `id` as the next index; `false`, adding nothing, when it
    /// is there already.
    pub fn push(&mut self, id: &str) -> bool {
        if self.by_id.contains_key(id) {
            return false;
        }
        self.by_id.insert(id.to_owned(), self.ids.len() as u32);
        self.ids.push(id.to_owned());
        true
    }

    /// The index of host `id`.
    pub fn index(&self, id: &str) -> Option<u32> {
        self.by_id.get(id).copied()
    }

    /// The id of host `index`.
    pub fn id(&self, index: u32) -> Option<&str> {
        self.ids.get(index as usize).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The index of host `id`, or an error naming `path`.
    pub fn resolve(&self, id: &str, path: impl fmt::Display) -> Result<u32, SnapshotError> {
        self.index(id)
            .ok_or_else(|| SnapshotError::at(path, SnapshotErrorKind::UnknownHost(id.to_owned())))
    }

    /// The indices of hosts `ids`, in order; errors name `path[i]`.
    pub fn resolve_all(&self, ids: &[String], path: &str) -> Result<Vec<u32>, SnapshotError> {
        let long = ids.len() >= KEPT_LIST_MIN_IDS;
        if long && let Some(indices) = self.lists.find(ids) {
            return Ok(indices);
        }
        let indices = ids
            .iter()
            .enumerate()
            .map(|(i, id)| self.resolve(id, format_args!("{path}[{i}]")))
            .collect::<Result<Vec<u32>, _>>()?;
        if long {
            self.lists.keep(ids, &indices);
        }
        Ok(indices)
    }
}

/// A snapshot as the pipeline reads it.
pub struct Cluster {
    pub inventory: Inventory,
    /// Shared: a cluster's next compact body with the same ids takes the
    /// last one's index (`arrow_snapshot::LastBody`) instead of a copy of
    /// every id.
    pub hosts: Arc<HostIndex>,
}

impl Snapshot {
    /// Parses a snapshot from JSON.
    pub fn from_json(text: &str) -> Result<Self, SnapshotError> {
        from_json(text)
    }

    /// Checks the snapshot's shape and builds its columns.
    pub fn build(&self) -> Result<Cluster, SnapshotError> {
        let mut hosts = HostColumns::with_capacity(self.hosts.len());
        for host in &self.hosts {
            hosts.push(host)?;
        }
        let mut vms = VmColumns::with_capacity(self.vms.len());
        for vm in &self.vms {
            vms.push(vm.row())?;
        }
        hosts.finish(vms)
    }
}

/// A snapshot's host columns, built one host at a time: what
/// [`Snapshot::build`] does over its hosts, and what an inline body's hosts
/// go through as they are read (`crate::inputs::CheckedHosts`), each host
/// dropped as soon as its row is in, so the hosts are never all held as
/// [`Host`]s at once (docs/performance.md, "Inline hosts read one at a
/// time").
///
/// `'a` is how long borrowed hosts' hardware lives: hardware goes into its
/// columns only at [`HostColumns::finish`], so it is kept until then,
/// borrowed from a [`Host`] pushed by reference or moved out of one pushed
/// by value.
#[derive(Clone, Default)]
pub struct HostColumns<'a> {
    index: HostIndex,
    statuses: Vec<HostStatus>,
    /// Each column as long as the last host that has the metric (flag,
    /// named metric); padded to every host at the end.
    metrics: BTreeMap<HostMetric, Vec<f64>>,
    flags: BTreeMap<HostFlag, Vec<bool>>,
    named_metrics: BTreeMap<String, Vec<f64>>,
    /// Every host names its metrics and flags again; each distinct name is
    /// resolved once, not once per host and metric.
    metric_names: HashMap<String, Option<HostMetric>>,
    flag_names: HashMap<String, Option<HostFlag>>,
    texts: [Interner; HostText::COUNT],
    labels: [LabelsBuilder; HostLabels::COUNT],
    hardware: Vec<Option<Cow<'a, HostHardware>>>,
}

impl<'a> HostColumns<'a> {
    /// Columns with room for `hosts` hosts.
    pub fn with_capacity(hosts: usize) -> Self {
        let mut columns = HostColumns {
            index: HostIndex::with_capacity(hosts),
            statuses: Vec::with_capacity(hosts),
            texts: std::array::from_fn(|_| Interner::with_capacity(hosts)),
            ..HostColumns::default()
        };
        columns.hardware.reserve(hosts);
        columns
    }

    /// Hosts pushed so far.
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    /// Adds `host` as the next row; its hardware is borrowed until
    /// [`HostColumns::finish`]. A refused host may leave part of its row:
    /// the columns are then not to be finished.
    pub fn push(&mut self, host: &'a Host) -> Result<(), SnapshotError> {
        self.push_row(host, host.hardware.as_deref())?;
        self.hardware
            .push(host.hardware.as_deref().map(Cow::Borrowed));
        Ok(())
    }

    /// Adds `host` as the next row, keeping only its hardware (moved, not
    /// copied) until [`HostColumns::finish`]; refused, as [`HostColumns::push`].
    pub fn push_owned(&mut self, mut host: Host) -> Result<(), SnapshotError> {
        let hardware = host.hardware.take();
        self.push_row(&host, hardware.as_deref())?;
        self.hardware.push(hardware.map(|hw| Cow::Owned(*hw)));
        Ok(())
    }

    /// Everything of `host` but its hardware's own columns; `hardware` is
    /// the host's (taken out of it by [`HostColumns::push_owned`]), for
    /// its CPU model and flags.
    fn push_row(
        &mut self,
        host: &Host,
        hardware: Option<&HostHardware>,
    ) -> Result<(), SnapshotError> {
        let i = self.len();
        if u32::try_from(i).is_err() {
            return Err(SnapshotError::at(
                "hosts",
                SnapshotErrorKind::TooMany { count: i + 1 },
            ));
        }
        if host.id.is_empty() {
            return Err(SnapshotError::at(
                format_args!("hosts[{i}].id"),
                SnapshotErrorKind::EmptyId,
            ));
        }
        if self.index.index(&host.id).is_some() {
            return Err(SnapshotError::at(
                format_args!("hosts[{i}].id"),
                SnapshotErrorKind::DuplicateHost(host.id.clone()),
            ));
        }
        for (name, &value) in &host.metrics {
            let metric = resolve_name(&mut self.metric_names, name, HostMetric::from_wit_name)
                .ok_or_else(|| {
                    SnapshotError::at(
                        format_args!("hosts[{i}].metrics.{name}"),
                        SnapshotErrorKind::UnknownMetric,
                    )
                })?;
            let column = self.metrics.entry(metric).or_default();
            column.resize(i + 1, 0.0);
            column[i] = value;
        }
        for (j, name) in host.flags.iter().enumerate() {
            let flag = resolve_name(&mut self.flag_names, name, HostFlag::from_wit_name)
                .ok_or_else(|| {
                    SnapshotError::at(
                        format_args!("hosts[{i}].flags[{j}]"),
                        SnapshotErrorKind::UnknownFlag(name.clone()),
                    )
                })?;
            let column = self.flags.entry(flag).or_default();
            column.resize(i + 1, false);
            column[i] = true;
        }
        self.index.push(&host.id);
        self.statuses.push(host.status.into());
        for (name, &value) in &host.named_metrics {
            let column = match self.named_metrics.get_mut(name.as_str()) {
                Some(column) => column,
                None => self.named_metrics.entry(name.clone()).or_default(),
            };
            column.resize(i + 1, f64::NAN);
            column[i] = value;
        }
        for &text in HostText::ALL {
            self.texts[text as usize].push(match text {
                HostText::Id => host.id.as_str(),
                HostText::Name => host.name.as_deref().unwrap_or(&host.id),
                HostText::Address => &host.address,
                HostText::Zone => &host.zone,
                HostText::CpuModel => hardware.map_or("", |hw| &hw.cpu_model),
            });
        }
        for &kind in HostLabels::ALL {
            let labels = &mut self.labels[kind as usize];
            match kind {
                HostLabels::Networks => labels.push_row(host.networks.iter().map(|n| (n, ""))),
                HostLabels::Capabilities => labels.push_row(&host.capabilities),
                HostLabels::Aggregates => labels.push_row(host.aggregates.keys().map(|a| (a, ""))),
                HostLabels::AggregateMetadata => {
                    labels.push_row(host.aggregates.values().flatten())
                }
                HostLabels::Instances => labels.push_row(host.instances.iter().flat_map(|i| {
                    [
                        ("tenant", i.tenant.as_str()),
                        ("instance-type", i.instance_type.as_str()),
                    ]
                })),
                HostLabels::CpuFlags | HostLabels::EmulatedMachines | HostLabels::ClusterLevels => {
                    let set = hardware.map(|hw| match kind {
                        HostLabels::CpuFlags => &hw.cpu_flags,
                        HostLabels::EmulatedMachines => &hw.emulated_machines,
                        _ => &hw.cluster_levels,
                    });
                    labels.push_row(set.into_iter().flatten().map(|s| (s, "")))
                }
            }
        }
        Ok(())
    }

    /// The columns of the hosts pushed and of `vms` on them.
    pub fn finish(self, vms: VmColumns) -> Result<Cluster, SnapshotError> {
        let n = self.len();
        let column = |e: ColumnLengthError| SnapshotError::at("hosts", e.into());
        let mut inv = Inventory::new(n, vms.len());
        for (metric, mut values) in self.metrics {
            values.resize(n, 0.0);
            inv.set_host_metric(metric, values).map_err(column)?;
        }
        for (flag, mut values) in self.flags {
            values.resize(n, false);
            inv.set_host_flag(flag, values).map_err(column)?;
        }
        inv.set_host_statuses(self.statuses).map_err(column)?;
        for (&text, interner) in HostText::ALL.iter().zip(self.texts) {
            inv.set_host_text(text, interner.finish()).map_err(column)?;
        }
        for (&kind, labels) in HostLabels::ALL.iter().zip(self.labels) {
            inv.set_host_labels(kind, labels.finish()).map_err(column)?;
        }
        for (name, mut values) in self.named_metrics {
            values.resize(n, f64::NAN);
            inv.set_host_named_metric(name, values).map_err(column)?;
        }
        crate::hardware::columns::fill(self.hardware.iter().map(Option::as_deref), &mut inv)
            .map_err(column)?;
        vms.finish(&mut inv, &self.index)?;
        Ok(Cluster {
            inventory: inv,
            hosts: Arc::new(self.index),
        })
    }
}

/// A snapshot's VM columns, built one VM at a time as [`HostColumns`]
/// builds the hosts': what [`Snapshot::build`] does over its VMs, and what
/// an inline body's `vms` go through as they are read
/// (`crate::inputs::CheckedVms`). Each VM's host is kept as its id until
/// the hosts are all known (a body may send `vms` before `hosts`), then
/// looked up once per distinct host.
#[derive(Clone, Default)]
pub struct VmColumns {
    ids: Interner,
    /// `None` while no VM pushed had a name of its own: the names are
    /// then the ids, copied at the end instead of interned a second time.
    names: Option<Interner>,
    hosts: Interner,
    metrics: [Vec<f64>; VmMetric::COUNT],
    flags: [Vec<bool>; VmFlag::COUNT],
}

impl VmColumns {
    /// Columns with room for `vms` VMs.
    pub fn with_capacity(vms: usize) -> Self {
        VmColumns {
            ids: Interner::with_capacity(vms),
            names: None,
            hosts: Interner::with_capacity(vms),
            metrics: std::array::from_fn(|_| Vec::with_capacity(vms)),
            flags: std::array::from_fn(|_| Vec::with_capacity(vms)),
        }
    }

    /// VMs pushed so far.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Adds `vm` as the next row. A refused VM may leave part of its row:
    /// the columns are then not to be finished.
    pub fn push(&mut self, vm: VmRow<'_>) -> Result<(), SnapshotError> {
        let i = self.len();
        if u32::try_from(i).is_err() {
            return Err(SnapshotError::at(
                "vms",
                SnapshotErrorKind::TooMany { count: i + 1 },
            ));
        }
        if vm.id.is_empty() {
            return Err(SnapshotError::at(
                format_args!("vms[{i}].id"),
                SnapshotErrorKind::EmptyId,
            ));
        }
        if !self.ids.push(vm.id) {
            return Err(SnapshotError::at(
                format_args!("vms[{i}].id"),
                SnapshotErrorKind::DuplicateVm(vm.id.to_owned()),
            ));
        }
        match (&mut self.names, vm.name) {
            (Some(names), name) => {
                names.push(name.unwrap_or(vm.id));
            }
            (None, Some(name)) => {
                let mut names = Interner::with_capacity(self.ids.len());
                for row in 0..i {
                    names.push(self.ids.get(row));
                }
                names.push(name);
                self.names = Some(names);
            }
            (None, None) => {}
        }
        self.hosts.push(vm.host);
        for &metric in VmMetric::ALL {
            self.metrics[metric as usize].push(match metric {
                VmMetric::MemoryMib => vm.memory_mib,
                VmMetric::MemoryGuaranteedMib => vm.memory_guaranteed_mib.unwrap_or(vm.memory_mib),
                VmMetric::Vcpus => f64::from(vm.vcpus),
                VmMetric::CpuUsagePercent => vm.cpu_usage_percent,
            });
        }
        for &flag in VmFlag::ALL {
            self.flags[flag as usize].push(match flag {
                VmFlag::Migratable => vm.migratable,
                VmFlag::HighlyAvailable => vm.highly_available,
                VmFlag::HostedEngine => vm.hosted_engine,
                VmFlag::Pending => vm.pending,
            });
        }
        Ok(())
    }

    /// Sets `inv`'s VM columns, each VM's host resolved against `hosts`
    /// (the first VM on an unknown host is named).
    pub(crate) fn finish(
        self,
        inv: &mut Inventory,
        hosts: &HostIndex,
    ) -> Result<(), SnapshotError> {
        let column = |e: ColumnLengthError| SnapshotError::at("vms", e.into());
        let host_ids = self.hosts.finish();
        let known: Vec<Option<u32>> = host_ids.values().map(|id| hosts.index(id)).collect();
        let on_host = host_ids
            .indices
            .iter()
            .enumerate()
            .map(|(i, &value)| {
                known[value as usize].ok_or_else(|| {
                    SnapshotError::at(
                        format_args!("vms[{i}].host"),
                        SnapshotErrorKind::UnknownHost(host_ids.value(value as usize).to_owned()),
                    )
                })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        inv.set_vm_hosts(on_host).map_err(column)?;
        for (&metric, values) in VmMetric::ALL.iter().zip(self.metrics) {
            inv.set_vm_metric(metric, values).map_err(column)?;
        }
        for (&flag, values) in VmFlag::ALL.iter().zip(self.flags) {
            inv.set_vm_flag(flag, values).map_err(column)?;
        }
        let ids = self.ids.finish();
        let names = self.names.map_or_else(|| ids.clone(), Interner::finish);
        inv.set_vm_text(VmText::Id, ids).map_err(column)?;
        inv.set_vm_text(VmText::Name, names).map_err(column)
    }
}

/// The metric or flag a snapshot name spells (`None`: none), each
/// distinct name resolved once: every host names its metrics and flags
/// again.
fn resolve_name<T: Copy>(
    resolved: &mut HashMap<String, Option<T>>,
    name: &str,
    from_wit_name: fn(&str) -> Option<T>,
) -> Option<T> {
    if let Some(&known) = resolved.get(name) {
        return known;
    }
    let found = snake_case_name(name).and_then(|wit| from_wit_name(&wit));
    resolved.insert(name.to_owned(), found);
    found
}

/// A metric's name in the snapshot format: the WIT name with `_`
/// (`memory-free-mib` → `memory_free_mib`); `snake_case_name` reverses it.
pub fn metric_name(metric: HostMetric) -> String {
    metric.wit_name().replace('-', "_")
}

/// The WIT spelling of a snapshot name (`memory_free_mib` →
/// `memory-free-mib`); `None` for a name already spelled with `-`, so that
/// each metric or flag has exactly one JSON spelling.
pub(crate) fn snake_case_name(name: &str) -> Option<String> {
    (!name.contains('-')).then(|| name.replace('_', "-"))
}

impl VmSpec {
    /// Parses a VM to place from JSON.
    pub fn from_json(text: &str) -> Result<Self, SnapshotError> {
        from_json(text)
    }

    /// The VM as units see it, host ids turned into indices. `path` names
    /// this VM in errors (`vm`, `cases[2].vm`).
    pub fn to_vm(&self, hosts: &HostIndex, path: &str) -> Result<Vm, SnapshotError> {
        let current_host = self
            .current_host
            .as_deref()
            .map(|id| hosts.resolve(id, format_args!("{path}.current_host")))
            .transpose()?;
        let dedicated_hosts =
            hosts.resolve_all(&self.dedicated_hosts, &format!("{path}.dedicated_hosts"))?;
        let groups = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                Ok(VmGroup {
                    id: g.id.clone(),
                    name: g.name.clone(),
                    scope: match g.scope {
                        Scope::Vms => GroupScope::Vms,
                        Scope::Hosts => GroupScope::Hosts,
                    },
                    positive: g.positive,
                    enforcing: g.enforcing,
                    priority: g.priority,
                    hosts: hosts.resolve_all(&g.hosts, &format!("{path}.groups[{i}].hosts"))?,
                })
            })
            .collect::<Result<_, SnapshotError>>()?;
        let pairs = |map: &BTreeMap<String, String>| {
            map.iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                .collect()
        };
        Ok(Vm {
            id: self.id.clone(),
            name: self.name.clone().unwrap_or_else(|| self.id.clone()),
            memory_mib: self.memory_mib,
            memory_guaranteed_mib: self.memory_guaranteed_mib.unwrap_or(self.memory_mib),
            vcpus: self.vcpus,
            cpu_sockets: self.cpu_sockets.unwrap_or(self.vcpus),
            cpu_cores_per_socket: self.cpu_cores_per_socket,
            cpu_threads_per_core: self.cpu_threads_per_core,
            cpu_usage_percent: self.cpu_usage_percent,
            disk_gib: self.disk_gib,
            current_host,
            dedicated_hosts,
            pinned: self.pinned,
            networks: self.networks.clone(),
            extra_specs: pairs(&self.extra_specs),
            image_properties: pairs(&self.image_properties),
            tenant: self.tenant.clone(),
            instance_type: self.instance_type.clone(),
            highly_available: self.highly_available,
            hosted_engine: self.hosted_engine,
            groups,
            hardware: self
                .hardware
                .as_ref()
                .map(VmHardwareSpec::to_model)
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{
      "hosts": [
        { "id": "h1", "name": "h1", "status": "up", "address": "10.0.0.1", "zone": "az1",
          "metrics": { "memory_total_mib": 16384, "memory_free_mib": 8192, "cpu_cores": 8 },
          "flags": ["spm"], "networks": ["ovirtmgmt"], "capabilities": {"k": "v"},
          "aggregates": { "agg1": { "k": "v" } }, "named_metrics": { "cpu.frequency": 2.4 },
          "instances": [ { "tenant": "t1", "instance_type": "m1.small" } ] },
        { "id": "h2", "status": "non_operational" }
      ],
      "vms": [
        { "id": "vm1", "name": "vm1", "host": "h1", "memory_mib": 1024, "memory_guaranteed_mib": 1024,
          "vcpus": 2, "cpu_usage_percent": 50, "migratable": true, "highly_available": false,
          "hosted_engine": false, "pending": false }
      ]
    }"#;

    /// A long list resolved once is kept: the same list again gets the
    /// same indices, and a list differing in one id is looked up afresh
    /// (its unknown id still named by its path).
    #[test]
    fn a_long_host_list_resolves_the_same_when_kept() {
        let snapshot = Snapshot {
            hosts: (0..200)
                .map(|i| Host {
                    id: format!("h{i}"),
                    ..Host::default()
                })
                .collect(),
            vms: Vec::new(),
        };
        let index = snapshot.build().expect("valid").hosts;
        let ids: Vec<String> = (0..150).rev().map(|i| format!("h{i}")).collect();
        let expected: Vec<u32> = (0..150).rev().collect();
        assert_eq!(index.resolve_all(&ids, "g").expect("known"), expected);
        assert_eq!(index.resolve_all(&ids, "g").expect("kept"), expected);
        let mut other = ids.clone();
        other[3] = "h199".to_owned();
        let mut other_expected = expected.clone();
        other_expected[3] = 199;
        assert_eq!(
            index.resolve_all(&other, "g").expect("known"),
            other_expected
        );
        other[7] = "nowhere".to_owned();
        let error = index.resolve_all(&other, "g").expect_err("unknown");
        assert!(error.to_string().contains("g[7]"), "{error}");
        // A copy of the index keeps nothing, and answers alike.
        assert_eq!(
            index.clone().resolve_all(&ids, "g").expect("known"),
            expected
        );
    }

    fn error_of(text: &str) -> String {
        match Snapshot::from_json(text).and_then(|s| s.build().map(|_| ())) {
            Ok(()) => panic!("expected an error for {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_documented_example_builds_every_column() {
        let cluster = Snapshot::from_json(EXAMPLE)
            .and_then(|s| s.build())
            .expect("the example is valid");
        let inv = &cluster.inventory;
        assert_eq!((inv.host_count(), inv.vm_count()), (2, 1));
        assert_eq!(inv.host_metric(HostMetric::MemoryFreeMib), [8192.0, 0.0]);
        assert_eq!(inv.host_flag(HostFlag::Spm), [true, false]);
        assert_eq!(
            inv.host_statuses(),
            [HostStatus::Up, HostStatus::NonOperational]
        );
        assert_eq!(inv.host_text(HostText::Name).get(1), "h2");
        assert_eq!(inv.host_text(HostText::Zone).get(0), "az1");
        let networks: Vec<_> = inv.host_labels(HostLabels::Networks).row(0).collect();
        assert_eq!(networks, [("ovirtmgmt", "")]);
        let meta: Vec<_> = inv
            .host_labels(HostLabels::AggregateMetadata)
            .row(0)
            .collect();
        assert_eq!(meta, [("k", "v")]);
        let instances: Vec<_> = inv.host_labels(HostLabels::Instances).row(0).collect();
        assert_eq!(instances, [("tenant", "t1"), ("instance-type", "m1.small")]);
        let freq = inv.host_named_metric("cpu.frequency");
        assert_eq!(freq[0], 2.4);
        assert!(freq[1].is_nan());
        assert_eq!(inv.vm_hosts(), [0]);
        assert_eq!(inv.vm_metric(VmMetric::Vcpus), [2.0]);
        assert_eq!(inv.vm_flag(VmFlag::Migratable), [true]);
        assert_eq!(cluster.hosts.index("h2"), Some(1));
    }

    #[test]
    fn errors_name_the_field_path() {
        assert_eq!(
            error_of(r#"{"hosts": [{"id": "h1", "metrics": {"memry_free_mib": 1}}]}"#),
            "hosts[0].metrics.memry_free_mib: unknown metric (expected a WIT host-metric name with `_`, e.g. memory_free_mib)"
        );
        assert_eq!(
            error_of(r#"{"hosts": [{"id": "h1"}, {"id": "h1"}]}"#),
            "hosts[1].id: duplicate host id \"h1\""
        );
        assert_eq!(
            error_of(r#"{"hosts": [{"id": "h1"}], "vms": [{"id": "v", "host": "h9"}]}"#),
            "vms[0].host: unknown host \"h9\""
        );
        assert_eq!(
            error_of(r#"{"hosts": [{"id": "h1", "flags": ["spm", "spn"]}]}"#),
            "hosts[0].flags[1]: unknown flag \"spn\" (expected spm, hosted_engine or isolated)"
        );
        assert!(
            error_of(r#"{"hosts": [{"id": "h1", "memory": 3}]}"#)
                .starts_with("hosts[0].memory: unknown field `memory`")
        );
        assert!(
            error_of(r#"{"hosts": [{"id": "h1", "metrics": {"cpu_cores": "eight"}}]}"#)
                .starts_with("hosts[0].metrics.cpu_cores: invalid type")
        );
        assert!(
            error_of(r#"{"hosts": [{"id": "h1", "status": "upp"}]}"#)
                .starts_with("hosts[0].status: unknown variant `upp`")
        );
    }

    #[test]
    fn a_name_resolved_once_still_applies_to_every_host() {
        // Names are resolved once per build (`fill_hosts`): a known name
        // fills every host's row, an unknown one is refused on whichever
        // host names it.
        let cluster = Snapshot::from_json(
            r#"{"hosts": [{"id": "a", "metrics": {"cpu_cores": 2}, "flags": ["spm"]},
                          {"id": "b", "metrics": {"cpu_cores": 4}, "flags": ["spm"]}]}"#,
        )
        .and_then(|s| s.build())
        .expect("valid");
        assert_eq!(
            cluster.inventory.host_metric(HostMetric::CpuCores),
            [2.0, 4.0]
        );
        assert_eq!(cluster.inventory.host_flag(HostFlag::Spm), [true, true]);
        assert!(
            error_of(
                r#"{"hosts": [{"id": "a", "metrics": {"cpu_cores": 2}},
                              {"id": "b", "metrics": {"cpu_cores": 4, "cpu_core": 4}}]}"#
            )
            .starts_with("hosts[1].metrics.cpu_core: unknown metric")
        );
        assert!(
            error_of(
                r#"{"hosts": [{"id": "a", "flags": ["spm"]}, {"id": "b", "flags": ["spm", "sp"]}]}"#
            )
            .starts_with("hosts[1].flags[1]: unknown flag")
        );
    }

    #[test]
    fn metric_names_have_one_spelling() {
        let err = error_of(r#"{"hosts": [{"id": "h1", "metrics": {"memory-free-mib": 1}}]}"#);
        assert!(err.starts_with("hosts[0].metrics.memory-free-mib: unknown metric"));
    }

    #[test]
    fn the_vm_to_place_maps_host_ids_to_indices() {
        let cluster = Snapshot::from_json(EXAMPLE)
            .and_then(|s| s.build())
            .expect("the example is valid");
        let spec = VmSpec::from_json(
            r#"{"id": "new", "memory_mib": 2048, "vcpus": 4, "current_host": "h2",
                "dedicated_hosts": ["h1"], "extra_specs": {"hw:cpu": ">= 4"},
                "groups": [{"id": "g", "scope": "hosts", "hosts": ["h2", "h1"]}]}"#,
        )
        .expect("valid VM");
        let vm = spec.to_vm(&cluster.hosts, "vm").expect("hosts are known");
        assert_eq!(vm.current_host, Some(1));
        assert_eq!(vm.dedicated_hosts, [0]);
        assert_eq!(vm.memory_guaranteed_mib, 2048.0);
        assert_eq!(vm.cpu_sockets, 4);
        assert_eq!(vm.name, "new");
        assert_eq!(vm.groups[0].hosts, [1, 0]);
        assert_eq!(vm.groups[0].scope, GroupScope::Hosts);
        assert!(vm.groups[0].enforcing && vm.groups[0].positive);

        let bad = VmSpec::from_json(r#"{"current_host": "h9"}"#).expect("valid JSON");
        assert_eq!(
            bad.to_vm(&cluster.hosts, "vm").unwrap_err().to_string(),
            "vm.current_host: unknown host \"h9\""
        );
        let bad =
            VmSpec::from_json(r#"{"groups": [{"hosts": ["h1", "h7"]}]}"#).expect("valid JSON");
        assert_eq!(
            bad.to_vm(&cluster.hosts, "cases[2].vm")
                .unwrap_err()
                .to_string(),
            "cases[2].vm.groups[0].hosts[1]: unknown host \"h7\""
        );
    }

    #[test]
    fn list_hints_repeat_their_key() {
        let hints: Hints = from_json(r#"{"same_host": ["a", "b"], "query": "q"}"#).expect("valid");
        let pairs = hint_pairs(&hints);
        assert_eq!(
            pairs,
            [
                KeyValue::new("query", "q"),
                KeyValue::new("same_host", "a"),
                KeyValue::new("same_host", "b")
            ]
        );
    }
}
