//! Hardware data over the API (issue #16): inconsistent hardware is refused
//! with a 422 naming the field, in inventory snapshots, inventory updates
//! and inline requests alike, and a refused update leaves the held
//! inventory (memory and store) exactly as it was; accepted hardware is
//! stored with its host.

use serde_json::{Value, json};

use crate::support::{Api, Client, dump, expect_status};

/// A host with two NUMA cells, a GPU and an SR-IOV card; `pinned` is cell
/// 0's pinned CPUs.
fn numa_host(id: &str, pinned: &[u32]) -> Value {
    json!({
        "id": id,
        "metrics": {"memory_total_mib": 8192, "memory_free_mib": 8192, "cpu_sockets": 2,
                    "cpu_cores": 4, "cpu_threads": 8},
        "hardware": {
            "cpu_model": "Skylake-Server-IBRS",
            "cpu_flags": ["vmx", "avx512f"],
            "numa_cells": [
                {"node": 0, "socket": 0, "memory_mib": 4096, "cpus": [0, 1, 2, 3],
                 "dedicated_cpus": [2, 3], "pinned_cpus": pinned,
                 "siblings": [[0, 1], [2, 3]],
                 "pages": [{"size_kib": 2048, "total": 512, "free": 256}],
                 "distances": [10, 21]},
                {"node": 1, "socket": 1, "memory_mib": 4096, "cpus": [4, 5, 6, 7],
                 "distances": [21, 10]}
            ],
            "pci_devices": [
                {"address": "0000:3b:00.0", "vendor_id": "10de", "product_id": "1eb8",
                 "numa_node": 0},
                {"address": "0000:5e:00.0", "vendor_id": "8086", "product_id": "1572",
                 "kind": "physical_function", "numa_node": 1},
                {"vendor_id": "8086", "product_id": "154c", "kind": "virtual_function",
                 "parent": "0000:5e:00.0", "numa_node": 1, "count": 8, "free": 6}
            ],
            "mdev_types": [{"name": "nvidia-35", "free": 4, "parent": "0000:3b:00.0"}]
        }
    })
}

async fn cluster(admin: &Client) -> String {
    let cluster = expect_status(
        &admin
            .post("/api/v1/clusters", &json!({ "name": "numa" }))
            .await,
        201,
    );
    cluster["id"].as_str().expect("id").to_owned()
}

/// Refused as inconsistent: values each fine alone that contradict one
/// another, which no schema can say (422, not 400), naming the field.
#[track_caller]
fn refused(reply: &crate::support::Reply, field: &str) {
    let body = expect_status(reply, 422);
    assert_eq!(body["error"]["code"], "invalid_snapshot", "{body}");
    assert_eq!(body["error"]["details"]["field"], field, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn inconsistent_hardware_is_refused_and_a_refused_update_changes_nothing() {
    let api = Api::start().await;
    let admin = api.admin();
    let id = cluster(&admin).await;
    let inventory = format!("/api/v1/clusters/{id}/inventory");

    // A snapshot with a pinned CPU that is not dedicated: refused.
    refused(
        &admin
            .put(
                &inventory,
                &json!({"generation": 1, "hosts": [numa_host("a", &[1])]}),
            )
            .await,
        "hosts[0].hardware.numa_cells[0].pinned_cpus[0]",
    );
    let held = expect_status(
        &admin
            .put(
                &inventory,
                &json!({"generation": 1, "hosts": [numa_host("a", &[3]), {"id": "b"}]}),
            )
            .await,
        200,
    );
    let before = dump(&api.db).await;
    assert!(before.contains("nvidia-35"), "the hardware is stored");

    // A batch whose second update is inconsistent is refused whole: the
    // first (valid) one is not applied either.
    let mut bad = numa_host("b", &[]);
    bad["hardware"]["pci_devices"][0]["numa_node"] = json!(7);
    refused(
        &admin
            .post(
                &format!("{inventory}/updates"),
                &json!({"updates": [
                    {"op": "upsert", "generation": 2, "host": numa_host("a", &[2, 3])},
                    {"op": "upsert", "generation": 3, "host": bad}
                ]}),
            )
            .await,
        "updates[1].host.hardware.pci_devices[0].numa_node",
    );
    let mut bad = numa_host("a", &[]);
    bad["hardware"]["numa_cells"][1]["cpus"] = json!([3, 4]);
    refused(
        &admin
            .post(
                &format!("{inventory}/updates"),
                &json!({"updates": [{"op": "upsert", "generation": 4, "host": bad}]}),
            )
            .await,
        "updates[0].host.hardware.numa_cells[1].cpus[0]",
    );
    assert_eq!(dump(&api.db).await, before, "nothing was stored");
    assert_eq!(
        expect_status(&admin.get(&inventory).await, 200),
        held,
        "the held inventory is as it was"
    );

    // An inline request whose VM's cells do not add up to its memory.
    refused(
        &admin
            .post(
                &format!("/api/v1/clusters/{id}/schedule?dry_run=true"),
                &json!({"vm": {"id": "v", "vcpus": 2, "memory_mib": 2048,
                               "hardware": {"numa_cells": [
                                   {"shared_vcpus": [0], "memory_mib": 1024},
                                   {"shared_vcpus": [1], "memory_mib": 512}]}},
                        "hosts": [numa_host("a", &[])]}),
            )
            .await,
        "vm.hardware.numa_cells",
    );
    // An unknown thread policy is refused by name, with its path.
    let reply = admin
        .post(
            &format!("/api/v1/clusters/{id}/schedule?dry_run=true"),
            &json!({"vm": {"id": "v", "hardware": {"thread_policy": "isolated"}}}),
        )
        .await;
    let body = expect_status(&reply, 400);
    assert_eq!(
        body["error"]["details"]["field"],
        "vm.hardware.thread_policy"
    );

    // Over inline hosts the explain record says what the VM would take,
    // and a host the fit refuses is refused in the record with why.
    let answer = expect_status(
        &admin
            .post(
                &format!("/api/v1/clusters/{id}/schedule?dry_run=true"),
                &json!({"vm": {"id": "v", "vcpus": 1, "memory_mib": 512,
                               "hardware": {"mdev_types": ["nvidia-35"]}},
                        "hosts": [numa_host("a", &[]),
                                  {"id": "b", "metrics": {"cpu_sockets": 1, "cpu_cores": 4,
                                   "cpu_threads": 8, "memory_total_mib": 8192,
                                   "memory_free_mib": 8192}}],
                        "candidates": ["b", "a"]}),
            )
            .await,
        200,
    );
    assert_eq!(answer["chosen_host"], "a", "{answer}");
    assert_eq!(
        answer["explain"]["hardware"]["mdevs"][0]["name"],
        "nvidia-35"
    );
    let claim = answer["explain"]["filters"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["unit"] == "hardware claim"));
    if let Some(claim) = claim {
        assert_eq!(claim["rejected"][0]["hosts"], json!(["b"]), "{answer}");
    }

    // A valid update with new hardware is applied and stored.
    expect_status(
        &admin
            .post(
                &format!("{inventory}/updates"),
                &json!({"updates": [
                    {"op": "upsert", "generation": 5, "host": numa_host("b", &[2])}
                ]}),
            )
            .await,
        200,
    );
    let after = dump(&api.db).await;
    assert_eq!(
        after.matches("nvidia-35").count(),
        2,
        "both hosts' hardware is stored"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_requests_never_take_the_last_gpu_or_pinned_cores_twice() {
    // No delay-and-retry: a request that finds the device taken answers at once.
    let api = Api::start_with(&["--retry-wait-ms", "0"]).await;
    let admin = api.admin();
    let id = cluster(&admin).await;
    // `a` has one GPU and two dedicated CPUs (2 and 3); `b` has neither.
    expect_status(
        &admin
            .put(
                &format!("/api/v1/clusters/{id}/inventory"),
                &json!({"generation": 1, "hosts": [numa_host("a", &[]), {"id": "b",
                        "metrics": {"memory_total_mib": 8192, "memory_free_mib": 8192,
                                    "cpu_sockets": 2, "cpu_cores": 4, "cpu_threads": 8}}]}),
            )
            .await,
        200,
    );
    for (what, hardware) in [
        (
            "gpu",
            json!({"pci_requests": [{"specs": [{"vendor_id": "10de", "product_id": "1eb8"}]}]}),
        ),
        ("pinned", json!({"cpu_policy": "dedicated"})),
    ] {
        let requests = (0..6).map(|i| {
            let admin = admin.clone();
            let path = format!("/api/v1/clusters/{id}/schedule");
            let body = json!({"vm": {"id": format!("{what}{i}"), "vcpus": 2, "memory_mib": 512,
                                     "hardware": hardware}});
            tokio::spawn(async move { admin.post(&path, &body).await })
        });
        let mut placed = Vec::new();
        let mut reasons = Vec::new();
        for request in requests {
            let answer = expect_status(&request.await.expect("the request ran"), 200);
            reasons.push(answer["reason"].clone());
            if let Some(host) = answer["chosen_host"].as_str() {
                let taken = &answer["claims"][0]["hardware"];
                assert!(
                    taken.is_object(),
                    "{what}: the claim holds hardware: {answer}"
                );
                assert_eq!(answer["instances"][0]["hardware"], *taken, "{answer}");
                placed.push((host.to_owned(), taken.clone()));
            }
        }
        assert_eq!(
            placed.len(),
            1,
            "{what}: exactly one request got it: {placed:?}; the others: {reasons:?}"
        );
        assert_eq!(placed[0].0, "a");
        match what {
            "gpu" => assert_eq!(placed[0].1["devices"][0]["address"], "0000:3b:00.0"),
            _ => assert_eq!(placed[0].1["cells"][0]["cpus"], json!([2, 3])),
        }
    }
    let claims = expect_status(
        &admin.get(&format!("/api/v1/clusters/{id}/claims")).await,
        200,
    );
    assert_eq!(
        claims["claims"].as_array().map(Vec::len),
        Some(2),
        "{claims}"
    );
}
