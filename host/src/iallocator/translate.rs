//! Ganeti's cluster as Sandpiper's snapshot: nodes become hosts, instances
//! running VMs on their primaries, a request's instance the VM to place;
//! and the placements a request makes applied back to the snapshot, so the
//! next instance of the same request sees them (hail does the same).
//!
//! Per node: memory total/free/reserved (MiB) and disk total/free (MiB,
//! here GiB) as Ganeti reports them, which already count the instances on
//! the node; `total_cpus` as cores and threads, the vCPUs of the instances
//! whose primary it is as `vcpus_used`. The node's group's `vcpu-ratio`
//! becomes its `cpu_allocation_ratio` named metric (the Nova capacity
//! filters read a host's own ratio first). Offline nodes are `down`,
//! drained and non-vm-capable ones `disabled`, and none of them is ever a
//! candidate. The group's name is the capability `ganeti:group` and an
//! aggregate of that name; each node tag the capability `ganeti:tag:<tag>`.

use std::collections::{BTreeMap, HashMap};

use super::wire::{AllocPolicy, Allocate, Input, InputError, Instance, Node, NodeGroup};
use crate::snapshot::{Host, RunningVm, Snapshot, Status, VmSpec};

/// MiB in a GiB: Ganeti counts disk in MiB, the snapshot in GiB.
const MIB_PER_GIB: f64 = 1024.0;

/// The capability naming a host's node group.
pub const GROUP_CAPABILITY: &str = "ganeti:group";

/// What an instance needs of a node.
#[derive(Clone, Debug, PartialEq)]
pub struct Need {
    pub name: String,
    pub memory_mib: f64,
    pub vcpus: u32,
    /// Disk on each of its nodes (DRBD mirrors it), MiB.
    pub disk_mib: f64,
    pub disk_template: String,
    /// Each disk's size, MiB (for the group's instance policy).
    pub disk_sizes: Vec<f64>,
}

impl Need {
    /// A new instance's needs.
    pub fn of_request(request: &Allocate) -> Need {
        Need {
            name: request.name.clone(),
            memory_mib: request.memory,
            vcpus: request.vcpus,
            disk_mib: request
                .disk_space_total
                .unwrap_or_else(|| request.disks.iter().map(|d| d.size).sum()),
            disk_template: request.disk_template.clone(),
            disk_sizes: request.disks.iter().map(|d| d.size).collect(),
        }
    }

    /// An existing instance's needs.
    pub fn of_instance(name: &str, instance: &Instance) -> Need {
        Need {
            name: name.to_owned(),
            memory_mib: instance.memory,
            vcpus: instance.vcpus,
            disk_mib: instance
                .disk_space_total
                .unwrap_or_else(|| instance.disks.iter().map(|d| d.size).sum()),
            disk_template: instance.disk_template.clone(),
            disk_sizes: instance.disks.iter().map(|d| d.size).collect(),
        }
    }

    /// The VM the policy places.
    pub fn vm(&self) -> VmSpec {
        VmSpec {
            id: self.name.clone(),
            memory_mib: self.memory_mib,
            vcpus: self.vcpus,
            disk_gib: self.disk_mib / MIB_PER_GIB,
            ..VmSpec::default()
        }
    }

    /// Whether the template mirrors the disks between two nodes of one
    /// group (a primary and a secondary): DRBD, Ganeti's only one.
    pub fn mirrored_internally(&self) -> bool {
        self.disk_template == "drbd"
    }

    /// Whether the template keeps the disks off the nodes (shared
    /// storage), so any node of the group can run the instance.
    pub fn mirrored_externally(&self) -> bool {
        matches!(
            self.disk_template.as_str(),
            "sharedfile" | "blockdev" | "rbd" | "ext" | "gluster" | "diskless"
        )
    }
}

/// The role a node plays for an instance placed on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Runs it: memory, vCPUs and disk.
    Primary,
    /// Mirrors its disks (DRBD): disk only.
    Secondary,
}

/// The cluster a request is decided over.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub snapshot: Snapshot,
    /// Host index by node name.
    index: HashMap<String, usize>,
    nodes: BTreeMap<String, Node>,
    groups: BTreeMap<String, NodeGroup>,
    pub instances: BTreeMap<String, Instance>,
}

impl Cluster {
    /// Translates an input's cluster. An instance on a node the input does
    /// not list is an error: the cluster's own data disagree.
    pub fn new(input: &Input) -> Result<Cluster, InputError> {
        let mut vcpus_used: HashMap<&str, (f64, f64)> = HashMap::new();
        let mut vms = Vec::with_capacity(input.instances.len());
        for (name, instance) in &input.instances {
            for (i, node) in instance.nodes.iter().enumerate() {
                if !input.nodes.contains_key(node) {
                    return Err(InputError::Key {
                        path: format!("instances.{name}.nodes[{i}]"),
                        message: format!("unknown node `{node}`"),
                    });
                }
            }
            let Some(primary) = instance.nodes.first() else {
                continue;
            };
            let used = vcpus_used.entry(primary.as_str()).or_default();
            used.0 += f64::from(instance.vcpus);
            used.1 += 1.0;
            vms.push(RunningVm {
                id: name.clone(),
                name: None,
                host: primary.clone(),
                memory_mib: instance.memory,
                memory_guaranteed_mib: None,
                vcpus: instance.vcpus,
                cpu_usage_percent: 0.0,
                migratable: true,
                highly_available: false,
                hosted_engine: false,
                pending: false,
            });
        }
        let mut hosts = Vec::with_capacity(input.nodes.len());
        let mut index = HashMap::with_capacity(input.nodes.len());
        for (name, node) in &input.nodes {
            let group = input.nodegroups.get(&node.group);
            let (vcpus, count) = vcpus_used.get(name.as_str()).copied().unwrap_or_default();
            index.insert(name.clone(), hosts.len());
            hosts.push(host(name, node, group, vcpus, count));
        }
        Ok(Cluster {
            snapshot: Snapshot { hosts, vms },
            index,
            nodes: input.nodes.clone(),
            groups: input.nodegroups.clone(),
            instances: input.instances.clone(),
        })
    }

    /// Whether a node may take an instance at all: online, not drained,
    /// able to run VMs.
    pub fn usable(&self, node: &str) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|n| !n.offline && !n.drained && n.vm_capable)
    }

    /// The group UUID of a node.
    pub fn group_of(&self, node: &str) -> Option<&str> {
        self.nodes.get(node).map(|n| n.group.as_str())
    }

    /// A group's name, or its UUID when the input does not describe it.
    pub fn group_name<'a>(&'a self, uuid: &'a str) -> &'a str {
        self.groups.get(uuid).map_or(uuid, |g| g.name.as_str())
    }

    /// A group's allocation policy; `preferred` when not described.
    pub fn alloc_policy(&self, uuid: &str) -> AllocPolicy {
        self.groups
            .get(uuid)
            .map_or(AllocPolicy::Preferred, |g| g.alloc_policy)
    }

    /// Why a group's instance policy refuses an instance, as hail's
    /// failure mode (`FailDisk`, `FailMem`, `FailCPU`), or `None` when it
    /// accepts it (or has no policy): its disk template must be allowed,
    /// and its memory, vCPUs, disk count and each disk's size within one
    /// of the policy's ranges. Ganeti's own checks (`ipolicy`), applied
    /// before the policy as a group's membership is.
    pub fn refused_by_group(&self, group: &str, need: &Need) -> Option<&'static str> {
        let policy = self.groups.get(group)?.ipolicy.as_ref()?;
        if let Some(templates) = &policy.disk_templates
            && !templates.contains(&need.disk_template)
        {
            return Some("FailDisk");
        }
        if policy.minmax.is_empty() {
            return None;
        }
        let within = |value: f64, min: Option<f64>, max: Option<f64>| {
            min.is_none_or(|m| value >= m) && max.is_none_or(|m| value <= m)
        };
        let mut refusal = "FailDisk";
        for range in &policy.minmax {
            let (min, max) = (&range.min, &range.max);
            let memory = within(need.memory_mib, min.memory_size, max.memory_size);
            let cpus = within(f64::from(need.vcpus), min.cpu_count, max.cpu_count);
            let disks = within(need.disk_sizes.len() as f64, min.disk_count, max.disk_count)
                && need
                    .disk_sizes
                    .iter()
                    .all(|&size| within(size, min.disk_size, max.disk_size));
            match (memory, cpus, disks) {
                (true, true, true) => return None,
                (false, _, _) => refusal = "FailMem",
                (_, false, _) => refusal = "FailCPU",
                _ => refusal = "FailDisk",
            }
        }
        Some(refusal)
    }

    /// Every group UUID that has a node, in order.
    pub fn group_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.nodes.values().map(|n| n.group.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The usable nodes of a group, by name.
    pub fn usable_in(&self, group: &str) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(name, n)| n.group == group && self.usable(name))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Applies a placement, so that later decisions of the same request
    /// see it: a primary loses the memory, vCPUs and disk, a secondary the
    /// disk.
    pub fn place(&mut self, node: &str, need: &Need, role: Role) {
        let Some(&i) = self.index.get(node) else {
            return;
        };
        let metrics = &mut self.snapshot.hosts[i].metrics;
        let mut sub = |key: &str, by: f64| {
            if let Some(v) = metrics.get_mut(key) {
                *v = (*v - by).max(0.0);
            }
        };
        sub("disk_free_gib", need.disk_mib / MIB_PER_GIB);
        if role == Role::Primary {
            sub("memory_free_mib", need.memory_mib);
            *metrics.entry("vcpus_used".to_owned()).or_default() += f64::from(need.vcpus);
            *metrics.entry("vm_count".to_owned()).or_default() += 1.0;
        }
    }

    /// Takes an instance's placement off a node (the inverse of
    /// [`Cluster::place`]), for an instance moving away.
    pub fn remove(&mut self, node: &str, need: &Need, role: Role) {
        let Some(&i) = self.index.get(node) else {
            return;
        };
        let metrics = &mut self.snapshot.hosts[i].metrics;
        let mut add = |key: &str, by: f64, cap: &str| {
            let cap = metrics.get(cap).copied().unwrap_or(f64::INFINITY);
            if let Some(v) = metrics.get_mut(key) {
                *v = (*v + by).min(cap);
            }
        };
        add(
            "disk_free_gib",
            need.disk_mib / MIB_PER_GIB,
            "disk_total_gib",
        );
        if role == Role::Primary {
            add("memory_free_mib", need.memory_mib, "memory_total_mib");
            let mut sub = |key: &str, by: f64| {
                if let Some(v) = metrics.get_mut(key) {
                    *v = (*v - by).max(0.0);
                }
            };
            sub("vcpus_used", f64::from(need.vcpus));
            sub("vm_count", 1.0);
        }
    }
}

/// One node as a host.
fn host(name: &str, node: &Node, group: Option<&NodeGroup>, vcpus: f64, count: f64) -> Host {
    let status = if node.offline {
        Status::Down
    } else if node.drained || !node.vm_capable {
        Status::Disabled
    } else {
        Status::Up
    };
    let mut metrics = BTreeMap::new();
    let mut set = |key: &str, value: Option<f64>| {
        metrics.insert(key.to_owned(), value.unwrap_or(0.0).max(0.0));
    };
    set("memory_total_mib", node.total_memory);
    set("memory_free_mib", node.free_memory);
    set("memory_reserved_mib", node.reserved_memory);
    set("disk_total_gib", node.total_disk.map(|d| d / MIB_PER_GIB));
    set("disk_free_gib", node.free_disk.map(|d| d / MIB_PER_GIB));
    set("cpu_cores", node.total_cpus);
    set("cpu_threads", node.total_cpus);
    set("vcpus_used", Some(vcpus));
    set("vm_count", Some(count));
    let group_name = group.map_or(node.group.as_str(), |g| g.name.as_str());
    let mut capabilities = BTreeMap::new();
    capabilities.insert(GROUP_CAPABILITY.to_owned(), group_name.to_owned());
    for tag in &node.tags {
        capabilities.insert(format!("ganeti:tag:{tag}"), "true".to_owned());
    }
    let mut aggregates = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    metadata.insert("ganeti_group_uuid".to_owned(), node.group.clone());
    aggregates.insert(group_name.to_owned(), metadata);
    let mut named_metrics = BTreeMap::new();
    if let Some(ratio) = group
        .and_then(|g| g.ipolicy.as_ref())
        .and_then(|p| p.vcpu_ratio)
    {
        named_metrics.insert("cpu_allocation_ratio".to_owned(), ratio);
    }
    Host {
        id: name.to_owned(),
        status,
        metrics,
        capabilities,
        aggregates,
        named_metrics,
        ..Host::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iallocator::wire::Input;

    #[test]
    fn nodes_become_hosts_and_only_online_undrained_vm_capable_ones_are_candidates() {
        let input = br#"{"version": 2,
          "nodegroups": {"g1": {"name": "default", "ipolicy": {"vcpu-ratio": 2.0}}},
          "nodes": {
            "up": {"total_memory": 4096, "free_memory": 2048, "total_disk": 10240,
                   "free_disk": 5120, "total_cpus": 8, "group": "g1", "tags": ["rack:a"]},
            "off": {"offline": true, "group": "g1"},
            "drained": {"drained": true, "group": "g1"},
            "storage": {"vm_capable": false, "group": "g1"}},
          "instances": {"i1": {"memory": 1024, "vcpus": 3, "nodes": ["up", "off"],
                               "disk_template": "drbd"}},
          "request": {"type": "node-evacuate", "instances": [], "evac_mode": "all"}}"#;
        let (input, _) = Input::parse(input).expect("valid");
        let cluster = Cluster::new(&input).expect("translated");
        assert_eq!(cluster.usable_in("g1"), ["up"]);
        let host = |id: &str| {
            cluster
                .snapshot
                .hosts
                .iter()
                .find(|h| h.id == id)
                .expect("host")
                .clone()
        };
        let up = host("up");
        assert_eq!(up.status, Status::Up);
        assert_eq!(up.metrics["disk_free_gib"], 5.0);
        assert_eq!(up.metrics["vcpus_used"], 3.0);
        assert_eq!(up.named_metrics["cpu_allocation_ratio"], 2.0);
        assert_eq!(up.capabilities[GROUP_CAPABILITY], "default");
        assert_eq!(up.capabilities["ganeti:tag:rack:a"], "true");
        assert_eq!(host("off").status, Status::Down);
        assert_eq!(host("drained").status, Status::Disabled);
        assert_eq!(host("storage").status, Status::Disabled);
        // The instance runs on its primary only.
        assert_eq!(cluster.snapshot.vms.len(), 1);
        assert_eq!(cluster.snapshot.vms[0].host, "up");
    }
}
