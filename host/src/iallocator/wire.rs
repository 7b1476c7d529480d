//! The IAllocator protocol's version-2 messages as Ganeti writes and reads
//! them (`doc/iallocator.rst`, `doc/design-multi-reloc.rst` in
//! ganeti/ganeti): the input file (cluster, node groups, nodes, instances,
//! request) and the answer's envelope. Unknown keys are ignored, as hail
//! ignores them: every Ganeti release adds some (spindles, `ndparams`,
//! networks), and an allocator that refused them would break on upgrade.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version this allocator speaks; Ganeti has sent 2 since 2.5.
pub const PROTOCOL_VERSION: u64 = 2;

/// The input file, with the request still as JSON: its keys depend on its
/// `type`, read by [`Request::parse`] so an error can name the key.
#[derive(Clone, Debug, Deserialize)]
pub struct Input {
    #[serde(default)]
    pub version: Option<u64>,
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default)]
    pub cluster_tags: Vec<String>,
    /// By UUID.
    #[serde(default)]
    pub nodegroups: BTreeMap<String, NodeGroup>,
    /// By name.
    #[serde(default)]
    pub nodes: BTreeMap<String, Node>,
    /// By name.
    #[serde(default)]
    pub instances: BTreeMap<String, Instance>,
    pub request: Value,
}

/// A node group.
#[derive(Clone, Debug, Deserialize)]
pub struct NodeGroup {
    pub name: String,
    #[serde(default)]
    pub alloc_policy: AllocPolicy,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub ipolicy: Option<IPolicy>,
}

/// The part of a group's instance policy this allocator reads.
#[derive(Clone, Debug, Deserialize)]
pub struct IPolicy {
    /// Virtual CPUs per physical CPU the group allows (hail's `FailCPU`).
    #[serde(rename = "vcpu-ratio", default)]
    pub vcpu_ratio: Option<f64>,
    /// Instance specs the group accepts: within any one of these ranges.
    #[serde(default)]
    pub minmax: Vec<MinMax>,
    /// Disk templates the group accepts; any when absent.
    #[serde(rename = "disk-templates", default)]
    pub disk_templates: Option<Vec<String>>,
}

/// One range of accepted instance specs.
#[derive(Clone, Debug, Deserialize)]
pub struct MinMax {
    pub min: Spec,
    pub max: Spec,
}

/// An instance spec bound; an absent figure does not bound.
#[derive(Clone, Debug, Deserialize)]
pub struct Spec {
    #[serde(rename = "memory-size", default)]
    pub memory_size: Option<f64>,
    #[serde(rename = "cpu-count", default)]
    pub cpu_count: Option<f64>,
    #[serde(rename = "disk-count", default)]
    pub disk_count: Option<f64>,
    /// Per disk, MiB.
    #[serde(rename = "disk-size", default)]
    pub disk_size: Option<f64>,
}

/// Whether new instances may go to a group, and in which order groups are
/// tried (`gnt-group modify --alloc-policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocPolicy {
    #[default]
    Preferred,
    LastResort,
    Unallocable,
}

/// A node. The runtime figures are absent for offline, drained and
/// non-vm-capable nodes (Ganeti does not query them), hence optional.
#[derive(Clone, Debug, Deserialize)]
pub struct Node {
    /// MiB.
    #[serde(default)]
    pub total_memory: Option<f64>,
    /// MiB, after the instances running on the node.
    #[serde(default)]
    pub free_memory: Option<f64>,
    /// MiB kept for the node's own use (Dom0).
    #[serde(default)]
    pub reserved_memory: Option<f64>,
    /// MiB.
    #[serde(default)]
    pub total_disk: Option<f64>,
    /// MiB.
    #[serde(default)]
    pub free_disk: Option<f64>,
    #[serde(default)]
    pub total_cpus: Option<f64>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub offline: bool,
    #[serde(default)]
    pub drained: bool,
    #[serde(default = "yes")]
    pub vm_capable: bool,
    #[serde(default)]
    pub master_candidate: bool,
    /// The UUID of its node group.
    #[serde(default)]
    pub group: String,
}

fn yes() -> bool {
    true
}

/// An existing instance.
#[derive(Clone, Debug, Deserialize)]
pub struct Instance {
    #[serde(default)]
    pub disks: Vec<Disk>,
    /// MiB, the template's overhead (DRBD metadata) included.
    #[serde(default)]
    pub disk_space_total: Option<f64>,
    #[serde(default = "one")]
    pub vcpus: u32,
    /// MiB.
    #[serde(default)]
    pub memory: f64,
    #[serde(default)]
    pub disk_template: String,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The primary first, then the secondary (DRBD).
    #[serde(default)]
    pub nodes: Vec<String>,
}

fn one() -> u32 {
    1
}

/// One disk of an instance or a request.
#[derive(Clone, Debug, Deserialize)]
pub struct Disk {
    /// MiB.
    pub size: f64,
}

/// What is asked, by the request's `type`.
#[derive(Clone, Debug)]
pub enum Request {
    Allocate(Allocate),
    MultiAllocate(Vec<Allocate>),
    Relocate(Relocate),
    ChangeGroup(ChangeGroup),
    NodeEvacuate(NodeEvacuate),
}

/// `allocate` (and each instance of `multi-allocate`): a new instance.
#[derive(Clone, Debug, Deserialize)]
pub struct Allocate {
    pub name: String,
    /// 1, or 2 for internally mirrored templates (DRBD): primary, secondary.
    pub required_nodes: u32,
    #[serde(default)]
    pub disks: Vec<Disk>,
    /// MiB, the template's overhead included; the disks' sum when absent.
    #[serde(default)]
    pub disk_space_total: Option<f64>,
    pub vcpus: u32,
    /// MiB.
    pub memory: f64,
    pub disk_template: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// `relocate`: a new secondary for a DRBD instance, off `relocate_from`.
#[derive(Clone, Debug, Deserialize)]
pub struct Relocate {
    pub name: String,
    pub required_nodes: u32,
    #[serde(default)]
    pub relocate_from: Vec<String>,
}

/// `change-group`: move instances into other node groups.
#[derive(Clone, Debug, Deserialize)]
pub struct ChangeGroup {
    pub instances: Vec<String>,
    /// Group UUIDs; empty means any group but the instance's own.
    #[serde(default)]
    pub target_groups: Vec<String>,
}

/// `node-evacuate`: move instances off their nodes within their group.
#[derive(Clone, Debug, Deserialize)]
pub struct NodeEvacuate {
    pub instances: Vec<String>,
    pub evac_mode: EvacMode,
}

/// Which of an instance's nodes an evacuation replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvacMode {
    PrimaryOnly,
    SecondaryOnly,
    All,
}

/// The `multi-allocate` request's body.
#[derive(Deserialize)]
struct MultiAllocate {
    instances: Vec<Allocate>,
}

/// Why an input file is not a valid request; the message names the key,
/// as hail's do (`key 'request' not found`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("Invalid JSON: {0}")]
    Json(String),
    #[error("{path}: {message}")]
    Key { path: String, message: String },
    #[error("unsupported protocol version {0} (this allocator speaks version {PROTOCOL_VERSION})")]
    Version(u64),
    #[error("request.type: unknown request type `{0}`")]
    UnknownType(String),
}

impl Input {
    /// Reads an input file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<(Input, Request), InputError> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| InputError::Json(e.to_string()))?;
        if !value.is_object() {
            return Err(InputError::Key {
                path: "$".to_owned(),
                message: "the input must be a JSON object".to_owned(),
            });
        }
        if value.get("request").is_none() {
            return Err(InputError::Key {
                path: "request".to_owned(),
                message: "key 'request' not found".to_owned(),
            });
        }
        let input: Input = keyed(value, "")?;
        if let Some(version) = input.version.filter(|&v| v != PROTOCOL_VERSION) {
            return Err(InputError::Version(version));
        }
        let request = Request::parse(&input.request)?;
        Ok((input, request))
    }
}

impl Request {
    /// Reads a request by its `type`.
    pub fn parse(request: &Value) -> Result<Request, InputError> {
        let Some(kind) = request.get("type") else {
            return Err(InputError::Key {
                path: "request.type".to_owned(),
                message: "key 'type' not found (the request must be an object with a `type`)"
                    .to_owned(),
            });
        };
        let Some(kind) = kind.as_str() else {
            return Err(InputError::Key {
                path: "request.type".to_owned(),
                message: "expected a string".to_owned(),
            });
        };
        let body = request.clone();
        Ok(match kind {
            "allocate" => Request::Allocate(keyed(body, "request.")?),
            "multi-allocate" => {
                Request::MultiAllocate(keyed::<MultiAllocate>(body, "request.")?.instances)
            }
            "relocate" => Request::Relocate(keyed(body, "request.")?),
            "change-group" => Request::ChangeGroup(keyed(body, "request.")?),
            "node-evacuate" => Request::NodeEvacuate(keyed(body, "request.")?),
            other => return Err(InputError::UnknownType(other.to_owned())),
        })
    }
}

/// Deserialises `value`, naming the key at fault (prefixed by `prefix`).
fn keyed<T: serde::de::DeserializeOwned>(value: Value, prefix: &str) -> Result<T, InputError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        InputError::Key {
            path: if path == "." {
                prefix.trim_end_matches('.').to_owned()
            } else {
                format!("{prefix}{path}")
            },
            message: e.into_inner().to_string(),
        }
    })
}

/// The answer's envelope; `result` is `[]` whenever `success` is false.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub success: bool,
    pub info: String,
    pub result: Value,
}

impl Envelope {
    /// A failed request: `result` empty, as the protocol requires.
    pub fn failed(info: impl Into<String>) -> Envelope {
        Envelope {
            success: false,
            info: info.into(),
            result: Value::Array(Vec::new()),
        }
    }
}
