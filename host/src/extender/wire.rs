//! The extender protocol's messages, `k8s.io/kube-scheduler/extender/v1`
//! (`ExtenderArgs`, `ExtenderFilterResult`, `HostPriority`), and the parts
//! of `v1.Pod` and `v1.Node` the translation reads.
//!
//! The v1 types carry no JSON tags, so kube-scheduler writes the Go field
//! names (`Pod`, `Nodes`, `NodeNames`, `FailedNodes`, ...), and Go's decoder
//! matches them case-insensitively: the lowercase spellings some
//! extenders' own clients use (`pod`, `nodes`, `nodenames`) are taken as
//! aliases. The embedded Kubernetes objects use their normal JSON
//! (`metadata`, `spec`, `status`, `items`); only the fields read here are
//! declared, and everything else an object carries is ignored, as an
//! extender must (kube-scheduler sends whole objects).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// What kube-scheduler sends to `filter` and `prioritize`: the pod and the
/// candidate nodes, as names (`nodeCacheCapable: true`) or whole
/// (`nodeCacheCapable: false`).
#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct ExtenderArgs {
    /// The pod being scheduled (`v1.Pod`).
    #[serde(rename = "Pod", alias = "pod")]
    #[schema(value_type = Object)]
    pub pod: Option<Pod>,
    /// The candidate nodes (`v1.NodeList`), when the extender is not node
    /// cache capable.
    #[serde(rename = "Nodes", alias = "nodes", default)]
    #[schema(value_type = Object)]
    pub nodes: Option<NodeList>,
    /// The candidate nodes' names, when the extender is node cache capable:
    /// hosts of the cluster's held inventory.
    #[serde(
        rename = "NodeNames",
        alias = "nodenames",
        alias = "nodeNames",
        default
    )]
    pub node_names: Option<Vec<String>>,
}

/// Node name → why the pod cannot go there.
pub type FailedNodesMap = BTreeMap<String, String>;

/// The answer to `filter`. kube-scheduler reads `NodeNames` from a node
/// cache capable extender and `Nodes` from any other; a non-empty `Error`
/// fails the pod's scheduling cycle with that message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, ToSchema)]
pub struct ExtenderFilterResult {
    /// The nodes that passed, as sent (`nodeCacheCapable: false`).
    #[serde(rename = "Nodes")]
    #[schema(value_type = Option<Object>)]
    pub nodes: Option<NodeItems>,
    /// The names of the nodes that passed (`nodeCacheCapable: true`).
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
    /// Node name → why the pod cannot go there now; preemption may help.
    #[serde(rename = "FailedNodes")]
    #[schema(value_type = Object)]
    pub failed_nodes: FailedNodesMap,
    /// Node name → why the pod cannot go there whatever is preempted.
    #[serde(rename = "FailedAndUnresolvableNodes")]
    #[schema(value_type = Object)]
    pub failed_and_unresolvable_nodes: FailedNodesMap,
    /// Why nothing could be decided; empty when the rest is the answer.
    #[serde(rename = "Error")]
    pub error: String,
}

/// A `v1.NodeList` as returned: the nodes exactly as kube-scheduler sent
/// them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeItems {
    pub items: Vec<Value>,
}

/// One node's score in the answer to `prioritize` (`HostPriorityList` is a
/// list of these), 0 to 10 (`MaxExtenderPriority`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct HostPriority {
    #[serde(rename = "Host")]
    pub host: String,
    #[serde(rename = "Score")]
    pub score: i64,
}

/// The highest score an extender may give (`MaxExtenderPriority` of the
/// v1 types); kube-scheduler multiplies it by 10 and by the extender's
/// `weight` to add it to its own plugins' 0-100 scores.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// A `v1.NodeList`, each node kept whole (to be returned as sent) and read
/// by [`Node`].
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeList {
    #[serde(default)]
    pub items: Vec<Value>,
}

/// Object metadata: the fields read here.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A `v1.Pod`: what the translation reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Pod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default)]
    pub containers: Vec<Container>,
    #[serde(default)]
    pub init_containers: Vec<Container>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// The pod's overhead (a RuntimeClass's, KubeVirt's), counted on top
    /// of its containers as kube-scheduler counts it.
    #[serde(default)]
    pub overhead: BTreeMap<String, Quantity>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Container {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub resources: Resources,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Resources {
    #[serde(default)]
    pub requests: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub limits: BTreeMap<String, Quantity>,
}

/// A quantity as JSON carries it: a string (`"3500m"`) or, from hand-made
/// clients, a number.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    Text(String),
    Number(f64),
}

/// A `v1.Node`: what the translation reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Node {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: NodeSpec,
    #[serde(default)]
    pub status: NodeStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeSpec {
    #[serde(default)]
    pub unschedulable: bool,
    #[serde(default)]
    pub taints: Vec<Taint>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Taint {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub effect: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeStatus {
    #[serde(default)]
    pub capacity: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub allocatable: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub conditions: Vec<NodeCondition>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeCondition {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub status: String,
}
