//! Kubernetes objects into Sandpiper's snapshot format: a pod into the VM
//! to place ([`VmSpec`]), a node into a host ([`Host`]). docs/kubernetes.md
//! has the table; what the snapshot format has no field for is listed
//! there too.

use std::collections::BTreeMap;

use super::quantity::{self, BadQuantity};
use super::wire::{Node, Pod, Quantity};
use crate::snapshot::{Host, Status, VmSpec};

/// Bytes in a MiB: the snapshot's memory unit.
const MIB: f64 = 1024.0 * 1024.0;

/// The label kube-scheduler's zone spreading reads; its value is the
/// host's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The label KubeVirt puts on a `virt-launcher` pod: the name of the
/// VirtualMachine it runs, which becomes the VM's display name.
pub const KUBEVIRT_VM_LABEL: &str = "vm.kubevirt.io/name";

/// Why a pod or node cannot be translated, naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TranslateError {
    #[error("{path}: {source}")]
    Quantity { path: String, source: BadQuantity },
    #[error("{0}: a name is required")]
    NoName(String),
}

fn value(q: &Quantity, path: impl FnOnce() -> String) -> Result<f64, TranslateError> {
    match q {
        Quantity::Number(n) => Ok(*n),
        Quantity::Text(text) => quantity::parse(text).map_err(|source| TranslateError::Quantity {
            path: path(),
            source,
        }),
    }
}

/// A resource of a quantity map, 0 when absent.
fn resource(
    map: &BTreeMap<String, Quantity>,
    name: &str,
    path: &str,
) -> Result<f64, TranslateError> {
    map.get(name)
        .map(|q| value(q, || format!("{path}.{name}")))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// What the pod asks of a node for `name` (`cpu`, `memory`), counted as
/// kube-scheduler counts a pod's requests: the sum over its containers, or
/// the largest init container when that is more (they run one at a time,
/// before the others), plus the pod's overhead.
fn pod_request(pod: &Pod, name: &str) -> Result<f64, TranslateError> {
    let mut sum = 0.0;
    for (i, c) in pod.spec.containers.iter().enumerate() {
        sum += resource(
            &c.resources.requests,
            name,
            &format!("Pod.spec.containers[{i}].resources.requests"),
        )?;
    }
    let mut init: f64 = 0.0;
    for (i, c) in pod.spec.init_containers.iter().enumerate() {
        init = init.max(resource(
            &c.resources.requests,
            name,
            &format!("Pod.spec.initContainers[{i}].resources.requests"),
        )?);
    }
    let overhead = resource(&pod.spec.overhead, name, "Pod.spec.overhead")?;
    Ok(sum.max(init) + overhead)
}

/// The VM a pod stands for. Its id is `namespace/name`; its memory is the
/// pod's memory request in MiB (rounded up) and its vCPUs the CPU request
/// rounded up to whole CPUs, at least one (the snapshot counts whole
/// vCPUs). For a KubeVirt `virt-launcher` pod this is the VM's memory
/// and vCPUs plus KubeVirt's overhead, which its compute container
/// requests. The node selector becomes `capabilities:<label>` extra specs,
/// matched against the hosts' labels by Nova's
/// `ComputeCapabilitiesFilter` when the cluster's policy has it.
pub fn pod_to_vm(pod: &Pod) -> Result<VmSpec, TranslateError> {
    let meta = &pod.metadata;
    if meta.name.is_empty() {
        return Err(TranslateError::NoName("Pod.metadata.name".to_owned()));
    }
    let id = if meta.namespace.is_empty() {
        meta.name.clone()
    } else {
        format!("{}/{}", meta.namespace, meta.name)
    };
    let cpu = pod_request(pod, "cpu")?;
    let memory = pod_request(pod, "memory")?;
    let vcpus = cpu.ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
    let extra_specs = pod
        .spec
        .node_selector
        .iter()
        .map(|(k, v)| (format!("capabilities:{k}"), v.clone()))
        .collect();
    Ok(VmSpec {
        id,
        name: meta.labels.get(KUBEVIRT_VM_LABEL).cloned(),
        memory_mib: (memory / MIB).ceil(),
        vcpus,
        extra_specs,
        ..VmSpec::default()
    })
}

/// The host a node stands for, named by the node's name.
///
/// Memory: `capacity` is the host's total, `allocatable` its free memory
/// (the node list carries no pods, so nothing else is known to be used);
/// either stands for the other when one is absent. CPUs: `allocatable`
/// (else `capacity`) CPUs as cores and threads, on one socket. A node
/// whose `Ready` condition is not `True` is `down`; one marked
/// `spec.unschedulable` (cordoned) is `disabled`. Labels are the host's
/// capabilities, and `topology.kubernetes.io/zone` its zone. Taints are
/// not translated: kube-scheduler's own TaintToleration has checked them
/// before any extender is called.
pub fn node_to_host(node: &Node, path: &str) -> Result<Host, TranslateError> {
    let meta = &node.metadata;
    if meta.name.is_empty() {
        return Err(TranslateError::NoName(format!("{path}.metadata.name")));
    }
    let status = &node.status;
    let quantity = |name: &str| -> Result<(Option<f64>, Option<f64>), TranslateError> {
        let read = |map: &BTreeMap<String, Quantity>, part: &str| {
            map.get(name)
                .map(|q| value(q, || format!("{path}.status.{part}.{name}")))
                .transpose()
        };
        Ok((
            read(&status.capacity, "capacity")?,
            read(&status.allocatable, "allocatable")?,
        ))
    };
    let (memory_capacity, memory_allocatable) = quantity("memory")?;
    let (cpu_capacity, cpu_allocatable) = quantity("cpu")?;
    let mut metrics = BTreeMap::new();
    if let Some(total) = memory_capacity.or(memory_allocatable) {
        metrics.insert("memory_total_mib".to_owned(), (total / MIB).floor());
    }
    if let Some(free) = memory_allocatable.or(memory_capacity) {
        metrics.insert("memory_free_mib".to_owned(), (free / MIB).floor());
    }
    if let Some(cpus) = cpu_allocatable.or(cpu_capacity) {
        metrics.insert("cpu_sockets".to_owned(), 1.0);
        metrics.insert("cpu_cores".to_owned(), cpus);
        metrics.insert("cpu_threads".to_owned(), cpus);
    }
    let ready = node
        .status
        .conditions
        .iter()
        .find(|c| c.kind == "Ready")
        .is_none_or(|c| c.status == "True");
    let host_status = if !ready {
        Status::Down
    } else if node.spec.unschedulable {
        Status::Disabled
    } else {
        Status::Up
    };
    Ok(Host {
        id: meta.name.clone(),
        status: host_status,
        zone: meta.labels.get(ZONE_LABEL).cloned().unwrap_or_default(),
        metrics,
        capabilities: meta.labels.clone(),
        ..Host::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("a pod")
    }

    fn node(json: serde_json::Value) -> Node {
        serde_json::from_value(json).expect("a node")
    }

    #[test]
    fn a_pod_asks_for_its_containers_or_its_largest_init_container_plus_overhead() {
        let vm = pod_to_vm(&pod(serde_json::json!({
            "metadata": {"name": "virt-launcher-vm1-x7k2p", "namespace": "vms",
                         "labels": {"vm.kubevirt.io/name": "vm1"}},
            "spec": {
                "containers": [
                    {"name": "compute", "resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}}},
                    {"name": "sidecar", "resources": {"requests": {"memory": "100Mi"}}}
                ],
                "initContainers": [{"resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}],
                "overhead": {"memory": "10Mi"},
                "nodeSelector": {"kubevirt.io/schedulable": "true"}
            }
        })))
        .expect("a VM");
        assert_eq!(vm.id, "vms/virt-launcher-vm1-x7k2p");
        assert_eq!(vm.name.as_deref(), Some("vm1"));
        assert_eq!(vm.vcpus, 4, "the init container asks more CPU");
        assert_eq!(vm.memory_mib, 2048.0 + 100.0 + 10.0);
        assert_eq!(
            vm.extra_specs.get("capabilities:kubevirt.io/schedulable"),
            Some(&"true".to_owned())
        );

        let empty = pod_to_vm(&pod(serde_json::json!({"metadata": {"name": "p"}}))).expect("a VM");
        assert_eq!(
            (empty.id.as_str(), empty.vcpus, empty.memory_mib),
            ("p", 1, 0.0)
        );

        let bad = pod(serde_json::json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"resources": {"requests": {"memory": "2 GB"}}}]}}));
        assert_eq!(
            pod_to_vm(&bad).map_err(|e| e.to_string()),
            Err(
                "Pod.spec.containers[0].resources.requests.memory: \"2 GB\" is not a \
                 Kubernetes quantity (expected e.g. 4, 3500m, 16Gi, 1e9)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_node_brings_its_capacity_state_labels_and_zone() {
        let host = node_to_host(
            &node(serde_json::json!({
                "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1", "disk": "ssd"}},
                "spec": {"unschedulable": true},
                "status": {
                    "capacity": {"cpu": "4", "memory": "16Gi"},
                    "allocatable": {"cpu": "3500m", "memory": "15Gi"},
                    "conditions": [{"type": "Ready", "status": "True"}]
                }
            })),
            "Nodes.items[0]",
        )
        .expect("a host");
        assert_eq!(host.id, "n1");
        assert_eq!(host.status, Status::Disabled);
        assert_eq!(host.zone, "z1");
        assert_eq!(host.capabilities.get("disk"), Some(&"ssd".to_owned()));
        assert_eq!(host.metrics["memory_total_mib"], 16384.0);
        assert_eq!(host.metrics["memory_free_mib"], 15360.0);
        assert_eq!(host.metrics["cpu_threads"], 3.5);

        let not_ready = node(
            serde_json::json!({"metadata": {"name": "n2"}, "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
        );
        assert_eq!(
            node_to_host(&not_ready, "n").expect("a host").status,
            Status::Down
        );
        let unnamed = node(serde_json::json!({}));
        assert_eq!(
            node_to_host(&unnamed, "Nodes.items[3]"),
            Err(TranslateError::NoName(
                "Nodes.items[3].metadata.name".to_owned()
            ))
        );
    }
}
