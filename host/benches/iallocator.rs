//! Ganeti's IAllocator front door, offline and in process: one `allocate`
//! request (a DRBD instance, so two picks: primary and secondary) over
//! 1,000 generated nodes in 4 node groups with 2,000 instances, answered
//! with the default policy (`nova_default`, sandboxed units). Each run
//! parses the input, translates it and decides, as one
//! `sandpiper iallocator` call does after loading its units; the median of
//! the runs is printed with the machine's load average:
//!
//! `iallocator nodes=1000 allocate_ms=<median> runs=<n> load=<1 5 15 min>`
//!
//! Run with `cargo bench --bench iallocator --no-run`, then the printed
//! executable with `--bench` (from `host/`).

use std::time::Instant;

use sandpiper::iallocator::{policy, run};
use serde_json::{Map, Value, json};

/// Nodes in the generated cluster.
const NODES: usize = 1000;
/// Node groups they are spread over.
const GROUPS: usize = 4;
/// Timed runs; the median is printed.
const RUNS: usize = 15;

fn input() -> Value {
    let mut groups = Map::new();
    for g in 0..GROUPS {
        groups.insert(
            format!("uuid-group-{g}"),
            json!({"name": format!("group{g}"), "alloc_policy": "preferred",
                   "ipolicy": {"vcpu-ratio": 4.0}, "tags": [], "networks": []}),
        );
    }
    let mut nodes = Map::new();
    let mut instances = Map::new();
    for n in 0..NODES {
        let used = (n % 7) as f64 * 4096.0;
        nodes.insert(
            format!("node{n:04}"),
            json!({"total_memory": 65536, "free_memory": 65536.0 - used,
                   "reserved_memory": 1024, "total_disk": 2_000_000,
                   "free_disk": 2_000_000.0 - used * 10.0, "total_cpus": 16,
                   "group": format!("uuid-group-{}", n % GROUPS), "tags": [],
                   "offline": false, "drained": false, "vm_capable": true,
                   "master_candidate": n < 10}),
        );
        for i in 0..2 {
            let secondary = (n + GROUPS) % NODES;
            instances.insert(
                format!("inst{n:04}-{i}"),
                json!({"memory": 2048, "vcpus": 2, "disk_template": "drbd",
                       "disks": [{"size": 10240}], "disk_space_total": 10368,
                       "nodes": [format!("node{n:04}"), format!("node{secondary:04}")],
                       "tags": []}),
            );
        }
    }
    json!({
        "version": 2, "cluster_name": "bench", "cluster_tags": [],
        "nodegroups": groups, "nodes": nodes, "instances": instances,
        "request": {"type": "allocate", "name": "new-instance", "required_nodes": 2,
                    "memory": 4096, "vcpus": 2, "disk_template": "drbd",
                    "disks": [{"size": 20480}], "disk_space_total": 20608, "tags": []}
    })
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let bytes = serde_json::to_vec(&input()).expect("input");
    let policy = policy::resolve(policy::DEFAULT_POLICY).expect("the default policy");
    let local = policy::local(&policy).expect("the default policy assembles");
    // One run first: warms the caches the later runs find warm on a
    // server too (the units' instances, the allocator).
    let first = run(&bytes, &local).expect("decided");
    assert!(first.success, "{}", first.info);
    let mut times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let envelope = run(&bytes, &local).expect("decided");
            let elapsed = started.elapsed().as_secs_f64() * 1000.0;
            assert!(envelope.success);
            elapsed
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let median = times[RUNS / 2];
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    println!("iallocator nodes={NODES} allocate_ms={median:.1} runs={RUNS} load={load}");
}
