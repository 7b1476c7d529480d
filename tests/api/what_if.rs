//! What-if on live data (issue #18): a dry run with another policy than
//! the cluster's (`POST .../schedule?dry_run=true&policy=ID`), and a logged
//! decision replayed with another policy (`POST
//! .../decisions/{decision_id}/replay?policy=ID`), both over the held
//! inventory, neither claiming nor logging anything.

use serde_json::{Value, json};

use crate::support::{Api, Client, expect_status, overloaded_hosts, overloaded_vms, policy_id};

/// A cluster on `evenly_distributed` holding the overloaded inventory
/// (`hot` 95 % CPU, `warm` 40 %, `cool` 10 %); its path.
async fn cluster(admin: &Client) -> String {
    let policy = policy_id(admin, "evenly_distributed").await;
    let created = expect_status(
        &admin
            .post(
                "/api/v1/clusters",
                &json!({ "name": "what-if", "scheduling_policy": { "id": policy },
                         "balance": { "enabled": false } }),
            )
            .await,
        201,
    );
    let path = format!("/api/v1/clusters/{}", created["id"].as_str().expect("id"));
    expect_status(
        &admin
            .put(
                &format!("{path}/inventory"),
                &json!({ "generation": 1, "hosts": overloaded_hosts(), "vms": overloaded_vms() }),
            )
            .await,
        200,
    );
    path
}

fn vm(id: &str) -> Value {
    json!({ "vm": { "id": id, "memory_mib": 1024, "vcpus": 1 } })
}

async fn logged(admin: &Client, cluster: &str) -> usize {
    expect_status(
        &admin.get(&format!("{cluster}/decisions?limit=500")).await,
        200,
    )
    .as_array()
    .expect("decisions")
    .len()
}

async fn claims(admin: &Client, cluster: &str) -> Value {
    expect_status(&admin.get(&format!("{cluster}/claims")).await, 200)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_decides_with_another_policy_and_changes_nothing() {
    let api = Api::start().await;
    let admin = api.admin();
    let cluster = cluster(&admin).await;
    let saving = policy_id(&admin, "power_saving").await;
    let schedule = format!("{cluster}/schedule");

    let own = expect_status(
        &admin
            .post(&format!("{schedule}?dry_run=true"), &vm("v9"))
            .await,
        200,
    );
    let other = expect_status(
        &admin
            .post(
                &format!("{schedule}?dry_run=true&policy={saving}"),
                &vm("v9"),
            )
            .await,
        200,
    );
    assert_eq!(own["chosen_host"], "cool", "{own}");
    assert_eq!(other["chosen_host"], "warm", "{other}");
    assert_eq!(other["policy_id"], saving.as_str(), "{other}");
    assert_eq!(other["decision_id"], Value::Null, "a dry run is not logged");
    assert_eq!(logged(&admin, &cluster).await, 0);
    assert_eq!(claims(&admin, &cluster).await, json!({ "claims": [] }));

    // Another policy only for a dry run, and only one that exists.
    let reply = admin
        .post(&format!("{schedule}?policy={saving}"), &vm("v9"))
        .await;
    let body = expect_status(&reply, 422);
    assert_eq!(body["error"]["code"], "policy_needs_dry_run");
    assert_eq!(body["error"]["details"]["field"], "policy");
    let missing = uuid::Uuid::new_v4();
    let body = expect_status(
        &admin
            .post(
                &format!("{schedule}?dry_run=true&policy={missing}"),
                &vm("v9"),
            )
            .await,
        404,
    );
    assert_eq!(body["error"]["details"]["resource"], "scheduling policy");
    assert_eq!(logged(&admin, &cluster).await, 0);
    assert_eq!(claims(&admin, &cluster).await, json!({ "claims": [] }));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_logged_decision_replays_with_another_policy_side_by_side() {
    let api = Api::start().await;
    let admin = api.admin();
    let cluster = cluster(&admin).await;
    let saving = policy_id(&admin, "power_saving").await;

    let made = expect_status(
        &admin.post(&format!("{cluster}/schedule"), &vm("v9")).await,
        200,
    );
    assert_eq!(made["chosen_host"], "cool", "{made}");
    let id = made["decision_id"].as_str().expect("logged").to_owned();
    let claims_before = claims(&admin, &cluster).await;
    let replay = format!("{cluster}/decisions/{id}/replay");

    let both = expect_status(
        &admin
            .post(&format!("{replay}?policy={saving}"), &json!({}))
            .await,
        200,
    );
    assert_eq!(both["original"]["id"], id.as_str());
    assert_eq!(both["original"]["answer"]["chosen_host"], "cool");
    let again = &both["replay"];
    assert_eq!(again["chosen_host"], "warm", "{again}");
    assert_eq!(again["policy_id"], saving.as_str());
    assert_eq!(again["dry_run"], true);
    assert!(
        again["instances"][0]["explain"]["filters"].is_array(),
        "the replay carries its full explain record: {again}"
    );

    // With the cluster's own policy, the same host: the decision's own
    // claim is set aside, as placing the VM again does.
    let same = expect_status(&admin.post(&replay, &json!({})).await, 200);
    assert_eq!(same["replay"]["chosen_host"], "cool", "{same}");

    assert_eq!(logged(&admin, &cluster).await, 1, "replays are not logged");
    assert_eq!(claims(&admin, &cluster).await, claims_before, "nor claim");

    // A decision over inline hosts kept no request to replay.
    let inline = expect_status(
        &admin
            .post(
                &format!("{cluster}/schedule"),
                &json!({ "vm": { "id": "v10" }, "hosts": overloaded_hosts() }),
            )
            .await,
        200,
    );
    let inline_id = inline["decision_id"].as_str().expect("logged");
    let body = expect_status(
        &admin
            .post(
                &format!("{cluster}/decisions/{inline_id}/replay"),
                &json!({}),
            )
            .await,
        409,
    );
    assert_eq!(body["error"]["code"], "not_replayable");
    let missing = uuid::Uuid::new_v4();
    let body = expect_status(
        &admin
            .post(&format!("{cluster}/decisions/{missing}/replay"), &json!({}))
            .await,
        404,
    );
    assert_eq!(body["error"]["details"]["resource"], "decision");
}
