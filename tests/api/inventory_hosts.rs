//! `GET /api/v1/clusters/{id}/inventory/hosts`: the held hosts a page at a
//! time (the console never loads a 10,000-host cluster whole), in
//! inventory order, each with what it reported in use and what the live
//! claims on it add.

use serde_json::{Value, json};

use crate::support::{Api, expect_status};

fn hosts(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "id": format!("host-{i:03}"),
                "metrics": {
                    "memory_total_mib": 65536.0,
                    "memory_free_mib": 49152.0,
                    "cpu_sockets": 2.0,
                    "cpu_cores": 16.0,
                    "cpu_threads": 32.0,
                    "cpu_usage_percent": 25.0,
                },
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn held_hosts_are_listed_a_page_at_a_time_with_their_claims() {
    let api = Api::start().await;
    let admin = api.admin();
    let cluster = expect_status(
        &admin
            .post("/api/v1/clusters", &json!({ "name": "paged" }))
            .await,
        201,
    );
    let path = format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"));
    expect_status(
        &admin
            .put(
                &format!("{path}/inventory"),
                &json!({ "generation": 1, "hosts": hosts(250) }),
            )
            .await,
        200,
    );
    let placed = expect_status(
        &admin
            .post(
                &format!("{path}/schedule"),
                &json!({ "vm": { "id": "vm-1", "memory_mib": 4096, "vcpus": 4 } }),
            )
            .await,
        200,
    );
    let chosen = placed["chosen_host"].as_str().expect("a host").to_owned();

    // The default page, then the last, short one.
    let first = expect_status(&admin.get(&format!("{path}/inventory/hosts")).await, 200);
    assert_eq!(first["total"], 250);
    assert_eq!(first["offset"], 0);
    assert_eq!(first["hosts"].as_array().map(Vec::len), Some(100));
    assert_eq!(first["hosts"][0]["id"], "host-000");
    let last = expect_status(
        &admin
            .get(&format!("{path}/inventory/hosts?offset=240&limit=50"))
            .await,
        200,
    );
    let ids: Vec<&str> = last["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| h["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids.len(), 10);
    assert_eq!(ids[0], "host-240");
    assert_eq!(ids[9], "host-249");

    // Every page tells reported use from claimed use.
    let mut all = Vec::new();
    for offset in [0, 100, 200] {
        let page = expect_status(
            &admin
                .get(&format!("{path}/inventory/hosts?offset={offset}&limit=100"))
                .await,
            200,
        );
        all.extend(page["hosts"].as_array().expect("hosts").iter().cloned());
    }
    let host = all
        .iter()
        .find(|h| h["id"] == chosen.as_str())
        .expect("the chosen host is listed");
    assert_eq!(host["memory_used_mib"], 16384.0);
    assert_eq!(host["memory_pending_mib"], 4096.0);
    assert_eq!(host["claims"], 1);
    assert_eq!(host["cpu_usage_percent"], 25.0);
    let other = all
        .iter()
        .find(|h| h["id"] != chosen.as_str())
        .expect("another host");
    assert_eq!(other["memory_pending_mib"], 0.0);
    assert_eq!(other["cpu_pending_percent"], 0.0);
    assert_eq!(other["claims"], 0);

    // Past the end: an empty page; above the limit: refused.
    let past = expect_status(
        &admin
            .get(&format!("{path}/inventory/hosts?offset=900"))
            .await,
        200,
    );
    assert_eq!(past["hosts"], json!([]));
    let too_many = admin
        .get(&format!("{path}/inventory/hosts?limit=501"))
        .await;
    assert_eq!(
        expect_status(&too_many, 400)["error"]["code"],
        "invalid_query"
    );
}
