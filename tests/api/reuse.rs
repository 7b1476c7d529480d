//! Incremental decisions over HTTP (issue #17): over a held cluster, a
//! decision of the same shape as the one before asks the per-host units
//! only about the hosts that changed since (here: the host the last
//! decision claimed, and a host the engine reported), and its explain
//! record counts the verdicts it reused; `--reuse-answers false` asks
//! every unit about every host. The answers being the same either way is
//! tests/all/reuse.rs's property.

use serde_json::{Value, json};

use crate::support::{Api, Client, expect_status};

const HOSTS: usize = 20;

fn host(i: usize, free_mib: f64) -> Value {
    json!({
        "id": format!("host-{i:02}"),
        "metrics": {
            "memory_total_mib": 65536.0,
            "memory_free_mib": free_mib,
            "cpu_sockets": 2.0,
            "cpu_cores": 16.0,
            "cpu_threads": 32.0,
            "cpu_usage_percent": (i * 3) as f64,
        },
    })
}

/// A cluster on the default policy holding `HOSTS` hosts, three of them
/// too full for the VMs scheduled here; its path.
async fn cluster(admin: &Client) -> String {
    let created = expect_status(
        &admin
            .post("/api/v1/clusters", &json!({ "name": "reuse" }))
            .await,
        201,
    );
    let path = format!("/api/v1/clusters/{}", created["id"].as_str().expect("id"));
    let hosts: Vec<Value> = (0..HOSTS)
        .map(|i| host(i, if i % 7 == 3 { 512.0 } else { 32768.0 }))
        .collect();
    expect_status(
        &admin
            .put(
                &format!("{path}/inventory"),
                &json!({ "generation": 1, "hosts": hosts }),
            )
            .await,
        200,
    );
    path
}

/// Schedules a 2 GiB VM; returns (chosen host, explain summary).
async fn schedule(admin: &Client, cluster: &str, vm: &str) -> (String, Value) {
    let answer = expect_status(
        &admin
            .post(
                &format!("{cluster}/schedule"),
                &json!({ "vm": { "id": vm, "memory_mib": 2048, "vcpus": 1 } }),
            )
            .await,
        200,
    );
    let chosen = answer["chosen_host"].as_str().expect("placed").to_owned();
    (chosen, answer["instances"][0]["explain"].clone())
}

/// The `Memory` filter's record.
fn memory(explain: &Value) -> &Value {
    explain["filters"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["unit"] == "Memory"))
        .unwrap_or_else(|| panic!("the default policy runs Memory: {explain}"))
}

fn reused(record: &Value) -> u64 {
    record["reused"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decision_asks_per_host_units_only_about_hosts_that_changed() {
    let api = Api::start().await;
    let admin = api.admin();
    let cluster = cluster(&admin).await;

    let (first_host, first) = schedule(&admin, &cluster, "vm-1").await;
    let input = memory(&first)["input"].as_u64().expect("input");
    assert_eq!(reused(memory(&first)), 0, "nothing to reuse yet: {first}");
    assert_eq!(memory(&first)["survivors"], input - 3, "{first}");

    // Only the host just claimed is asked about again.
    let (_, second) = schedule(&admin, &cluster, "vm-2").await;
    assert_eq!(memory(&second)["input"], input, "{second}");
    assert_eq!(reused(memory(&second)), input - 1, "{second}");
    assert_eq!(memory(&second)["survivors"], input - 3, "{second}");
    // A report makes its host asked about again: the full host now fits.
    let update = json!({ "updates": [
        { "op": "upsert", "generation": 2, "host": host(3, 32768.0) }
    ] });
    expect_status(
        &admin
            .post(&format!("{cluster}/inventory/updates"), &update)
            .await,
        200,
    );
    let (_, third) = schedule(&admin, &cluster, "vm-3").await;
    let changed = if first_host == "host-03" { 1 } else { 2 };
    assert_eq!(reused(memory(&third)), input - changed, "{third}");
    assert_eq!(memory(&third)["survivors"], input - 2, "{third}");
}

#[tokio::test(flavor = "multi_thread")]
async fn reuse_can_be_turned_off() {
    let api = Api::start_with(&["--reuse-answers", "false"]).await;
    let admin = api.admin();
    let cluster = cluster(&admin).await;
    schedule(&admin, &cluster, "vm-1").await;
    let (_, second) = schedule(&admin, &cluster, "vm-2").await;
    let any_reused = ["filters", "scores"].iter().any(|kind| {
        second[kind]
            .as_array()
            .is_some_and(|records| records.iter().any(|r| reused(r) > 0))
    });
    assert!(!any_reused, "nothing is reused: {second}");
    assert_eq!(
        memory(&second)["survivors"],
        memory(&second)["input"].as_u64().unwrap() - 3
    );
}
