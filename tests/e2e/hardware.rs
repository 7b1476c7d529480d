//! Issue #16 end to end: the real server holding a cluster of GPU hosts,
//! NUMA hosts with a few dedicated CPUs, and a plain host, under a policy
//! of Nova's `NUMATopologyFilter` and `PciPassthroughFilter`. Engine
//! threads ask at once for the last free GPUs and then for the last free
//! pinned cores. Afterwards:
//!
//! * every GPU and every pair of dedicated CPUs went to exactly one VM
//!   (the claims hold them, and no two claims hold the same one);
//! * each placed VM's answer and claim say which device or which cell and
//!   CPUs it took;
//! * each refused request was refused with the filter's reasons for every
//!   host: the devices and cores taken, the hosts that never had any.
//!
//! Nothing depends on how the threads interleave: the checks are about
//! the final claims and the shape of each answer.

use std::collections::BTreeSet;
use std::thread;

use serde_json::{Value, json};

use crate::support::{Client, Server, expect_status, unit_id};

/// Engine threads racing for each kind of resource.
const THREADS: usize = 6;

/// A GPU (NVIDIA 10de:1eb8) on NUMA node 0 of a two-cell host.
fn gpu_host(id: &str, address: &str) -> Value {
    json!({
        "id": id,
        "metrics": {"memory_total_mib": 16384, "memory_free_mib": 16384, "cpu_threads": 8},
        "hardware": {
            "numa_cells": [
                {"node": 0, "memory_mib": 8192, "cpus": [0, 1, 2, 3], "distances": [10, 21]},
                {"node": 1, "memory_mib": 8192, "cpus": [4, 5, 6, 7], "distances": [21, 10]}
            ],
            "pci_devices": [
                {"address": address, "vendor_id": "10de", "product_id": "1eb8", "numa_node": 0}
            ]
        }
    })
}

/// A two-cell host whose node 1 has two dedicated CPUs (6 and 7, thread
/// siblings) for pinned VMs; no devices.
fn numa_host(id: &str) -> Value {
    json!({
        "id": id,
        "metrics": {"memory_total_mib": 16384, "memory_free_mib": 16384, "cpu_threads": 8},
        "hardware": {
            "numa_cells": [
                {"node": 0, "memory_mib": 8192, "cpus": [0, 1, 2, 3],
                 "siblings": [[0, 1], [2, 3]]},
                {"node": 1, "memory_mib": 8192, "cpus": [4, 5, 6, 7],
                 "dedicated_cpus": [6, 7], "siblings": [[4, 5], [6, 7]]}
            ]
        }
    })
}

/// The cluster: two GPU hosts, two NUMA hosts and one with no hardware
/// data; its policy runs the two hardware filters.
fn setup(server: &Server) -> (String, Client) {
    let admin = server.admin();
    let policy = expect_status(
        &admin.post(
            "/api/v1/schedulingpolicies",
            &json!({ "name": "hardware", "description": "Nova's NUMA and PCI filters" }),
        ),
        201,
    );
    let policy_path = format!(
        "/api/v1/schedulingpolicies/{}",
        policy["id"].as_str().expect("id")
    );
    for name in ["NUMATopologyFilter", "PciPassthroughFilter"] {
        let unit = unit_id(&admin, name);
        expect_status(
            &admin.post(
                &format!("{policy_path}/filters"),
                &json!({ "scheduling_policy_unit": { "id": unit } }),
            ),
            201,
        );
    }
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "hardware", "scheduling_policy": { "id": policy["id"] } }),
        ),
        201,
    );
    let path = format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"));
    let hosts = json!([
        gpu_host("gpu1", "0000:3b:00.0"),
        gpu_host("gpu2", "0000:af:00.0"),
        numa_host("numa1"),
        numa_host("numa2"),
        {"id": "plain", "metrics": {"memory_total_mib": 16384, "memory_free_mib": 16384}}
    ]);
    expect_status(
        &admin.put(
            &format!("{path}/inventory"),
            &json!({ "generation": 1, "hosts": hosts }),
        ),
        200,
    );
    let token = expect_status(
        &admin.post(
            "/api/v1/tokens",
            &json!({ "name": "hardware-engine", "role": "engine" }),
        ),
        201,
    );
    let engine = server.client(Some(token["secret"].as_str().expect("secret")));
    (path, engine)
}

/// `THREADS` VMs with `hardware` needs, asked for at once; the answers.
fn race(engine: &Client, path: &str, what: &str, hardware: &Value) -> Vec<Value> {
    thread::scope(|scope| {
        let asks: Vec<_> = (0..THREADS)
            .map(|i| {
                let body = json!({"vm": {"id": format!("{what}-{i}"), "vcpus": 2,
                                         "memory_mib": 1024, "hardware": hardware}});
                scope.spawn(move || {
                    expect_status(&engine.post(&format!("{path}/schedule"), &body), 200)
                })
            })
            .collect();
        asks.into_iter()
            .map(|ask| ask.join().expect("the request ran"))
            .collect()
    })
}

/// Every reason a summary explain gives, with the filter that gave it and
/// the hosts it names.
fn rejections(answer: &Value) -> Vec<(String, String, Vec<String>)> {
    let explain = answer["instances"]
        .get(0)
        .map_or(&answer["explain"], |i| &i["explain"]);
    explain["filters"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|filter| {
            filter["rejected"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |r| {
                    let hosts = r["examples"]
                        .as_array()
                        .or(r["hosts"].as_array())
                        .into_iter()
                        .flatten()
                        .filter_map(|h| h.as_str().map(str::to_owned))
                        .collect();
                    (
                        filter["unit"].as_str().unwrap_or_default().to_owned(),
                        r["reason"].as_str().unwrap_or_default().to_owned(),
                        hosts,
                    )
                })
        })
        .collect()
}

/// The placed answers of `answers`: (host, hardware taken).
fn placed(answers: &[Value]) -> Vec<(String, Value)> {
    answers
        .iter()
        .filter_map(|answer| {
            let host = answer["chosen_host"].as_str()?;
            let taken = &answer["instances"][0]["hardware"];
            assert!(taken.is_object(), "the answer says what it took: {answer}");
            assert_eq!(
                answer["claims"][0]["hardware"], *taken,
                "the claim holds what the answer says: {answer}"
            );
            Some((host.to_owned(), taken.clone()))
        })
        .collect()
}

#[test]
fn concurrent_requests_never_share_a_device_or_a_pinned_core_and_say_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(dir.path(), &[], &[("SANDPIPER_RETRY_WAIT_MS", "0")]);
    let (path, engine) = setup(&server);

    // The last two GPUs.
    let gpu = json!({"pci_requests": [{"count": 1,
                     "specs": [{"vendor_id": "10de", "product_id": "1eb8"}]}]});
    let answers = race(&engine, &path, "gpu", &gpu);
    let got = placed(&answers);
    let hosts: BTreeSet<&str> = got.iter().map(|(host, _)| host.as_str()).collect();
    assert_eq!(
        hosts,
        BTreeSet::from(["gpu1", "gpu2"]),
        "one VM on each GPU host: {got:?}"
    );
    assert_eq!(got.len(), 2, "two GPUs, two VMs: {got:?}");
    for (host, taken) in &got {
        let address = if host == "gpu1" {
            "0000:3b:00.0"
        } else {
            "0000:af:00.0"
        };
        assert_eq!(taken["devices"][0]["address"], address, "{host}: {taken}");
    }
    for answer in answers.iter().filter(|a| a["chosen_host"].is_null()) {
        let why = rejections(answer);
        let by_pci: BTreeSet<&str> = why
            .iter()
            .filter(|(unit, reason, _)| unit == "PciPassthroughFilter" && !reason.is_empty())
            .flat_map(|(_, _, hosts)| hosts.iter().map(String::as_str))
            .collect();
        assert!(
            by_pci.contains("gpu1") && by_pci.contains("gpu2"),
            "a refused GPU request names the taken GPU hosts and why: {why:?}"
        );
    }

    // The last dedicated cores: each NUMA host has one pair.
    let pinned = json!({"cpu_policy": "dedicated"});
    let answers = race(&engine, &path, "pinned", &pinned);
    let got = placed(&answers);
    let hosts: BTreeSet<&str> = got.iter().map(|(host, _)| host.as_str()).collect();
    assert_eq!(
        hosts,
        BTreeSet::from(["numa1", "numa2"]),
        "one pinned VM on each NUMA host: {got:?}"
    );
    assert_eq!(got.len(), 2, "two pairs of cores, two VMs: {got:?}");
    for (host, taken) in &got {
        let cell = &taken["cells"][0];
        assert_eq!(
            cell["node"], 1,
            "{host}: the cell with dedicated CPUs: {taken}"
        );
        let cpus: BTreeSet<u64> = cell["cpus"]
            .as_array()
            .expect("cpus")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        assert_eq!(cpus, BTreeSet::from([6, 7]), "{host}: {taken}");
    }
    for answer in answers.iter().filter(|a| a["chosen_host"].is_null()) {
        let why = rejections(answer);
        let numa_reasons: Vec<&str> = why
            .iter()
            .filter(|(unit, _, hosts)| {
                unit == "NUMATopologyFilter" && hosts.iter().any(|h| h.starts_with("numa"))
            })
            .map(|(_, reason, _)| reason.as_str())
            .collect();
        assert!(
            numa_reasons
                .iter()
                .any(|reason| reason.contains("dedicated CPUs")),
            "a refused pinned request says the NUMA hosts' dedicated CPUs are taken: {why:?}"
        );
    }

    // The server's own record: four claims, no device and no CPU twice.
    let claims = expect_status(&engine.get(&format!("{path}/claims")), 200);
    let claims = claims["claims"].as_array().expect("claims");
    assert_eq!(claims.len(), 4, "{claims:?}");
    let mut held = BTreeSet::new();
    for claim in claims {
        let host = claim["host_id"].as_str().unwrap_or_default();
        let hardware = &claim["hardware"];
        for device in hardware["devices"].as_array().into_iter().flatten() {
            let address = device["address"].as_str().unwrap_or_default();
            assert!(held.insert(format!("{host} {address}")), "{address} twice");
        }
        for cell in hardware["cells"].as_array().into_iter().flatten() {
            for cpu in cell["cpus"].as_array().into_iter().flatten() {
                assert!(
                    held.insert(format!("{host} cpu {cpu}")),
                    "{host} CPU {cpu} twice"
                );
            }
        }
    }
    assert_eq!(held.len(), 2 + 4, "two GPUs and four CPUs held: {held:?}");
}
