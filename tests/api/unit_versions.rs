//! A unit's versions and rollbacks: every module a unit ran is listed and
//! can be restored, as a new version; a rollback the policies using the
//! unit cannot take is refused and changes nothing; a decision that began
//! before a rollback finishes on the module it began with, and the next
//! one runs the restored module; only `--unit-versions-retained` versions
//! are kept.

use serde_json::{Value, json};

use sandpiper::api::prepared::prepared;
use sandpiper::placement::{PlaceRequest, over_snapshot};
use sandpiper::snapshot::Snapshot;

use crate::support::{Api, Client, builtin_wasm, distinct_copy, expect_status, tour_hosts};

const UNITS: &str = "/api/v1/schedulingpolicyunits";

/// The tour's VM, too big in memory for `small` (the Memory filter) and in
/// vCPUs for `small` and `mid` (the CPU filter).
fn vm() -> Value {
    json!({ "id": "vm-1", "memory_mib": 4096, "vcpus": 24 })
}

/// A unit made of the built-in unit `dir`'s module, and a policy using it
/// as a filter on a cluster; returns the unit's path and the cluster's id.
async fn unit_on_a_cluster(admin: &Client, name: &str, dir: &str) -> (String, String) {
    let unit = expect_status(
        &admin
            .post_wasm(&format!("{UNITS}?name={name}"), builtin_wasm(dir))
            .await,
        201,
    );
    let policy = expect_status(
        &admin
            .post(
                "/api/v1/schedulingpolicies",
                &json!({ "name": format!("{name}-policy") }),
            )
            .await,
        201,
    );
    expect_status(
        &admin
            .post(
                &format!(
                    "/api/v1/schedulingpolicies/{}/filters",
                    policy["id"].as_str().expect("id")
                ),
                &json!({ "scheduling_policy_unit": { "id": unit["id"] } }),
            )
            .await,
        201,
    );
    let cluster = expect_status(
        &admin
            .post(
                "/api/v1/clusters",
                &json!({ "name": format!("{name}-cluster"), "scheduling_policy": { "id": policy["id"] } }),
            )
            .await,
        201,
    );
    (
        format!("{UNITS}/{}", unit["id"].as_str().expect("id")),
        cluster["id"].as_str().expect("id").to_owned(),
    )
}

/// The hosts the policy's one filter rejected, from an explain record.
fn rejected(explain: &Value) -> Vec<String> {
    explain["filters"][0]["rejected"]
        .as_array()
        .expect("rejections")
        .iter()
        .flat_map(|r| r["hosts"].as_array().expect("hosts").iter())
        .map(|h| h.as_str().expect("id").to_owned())
        .collect()
}

async fn schedule(admin: &Client, cluster: &str) -> Vec<String> {
    let answer = expect_status(
        &admin
            .post(
                &format!("/api/v1/clusters/{cluster}/schedule"),
                &json!({ "vm": vm(), "hosts": tour_hosts() }),
            )
            .await,
        200,
    );
    rejected(&answer["explain"])
}

fn versions(list: &Value) -> Vec<(i64, bool, Value)> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|v| {
            (
                v["version"].as_i64().expect("version"),
                v["current"].as_bool().expect("current"),
                v["rollback_of"].clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_restores_a_version_and_decisions_in_flight_keep_theirs() {
    let api = Api::start().await;
    let admin = api.admin();
    let (unit, cluster) = unit_on_a_cluster(&admin, "Gate", "memory").await;
    let memory_sha = expect_status(&admin.get(&unit).await, 200)["module"]["sha256"].clone();
    assert_eq!(schedule(&admin, &cluster).await, ["small"], "Memory");

    let replaced = expect_status(
        &admin
            .put_wasm(&format!("{unit}/module"), builtin_wasm("cpu"))
            .await,
        200,
    );
    assert_eq!(schedule(&admin, &cluster).await, ["small", "mid"], "CPU");
    let listed = expect_status(&admin.get(&format!("{unit}/versions")).await, 200);
    assert_eq!(
        versions(&listed),
        [(2, true, Value::Null), (1, false, Value::Null)]
    );
    assert_eq!(listed[0]["module"], replaced["module"]);
    assert_eq!(listed[1]["module"]["sha256"], memory_sha);
    assert_eq!(
        listed[1]["exports"],
        json!({ "filter": true, "score": false, "balance": false })
    );
    assert!(listed[0]["uploaded_by"].is_string() && listed[0]["uploaded_at"].is_string());

    // A decision in flight: it has taken the cluster's policy (what every
    // decision does once, before its units run) and not run it yet.
    let cluster_id = cluster.parse().expect("a uuid");
    let in_flight = prepared(&api.state, cluster_id).await.expect("prepared");

    let restored = expect_status(
        &admin
            .post(&format!("{unit}/rollback"), &json!({ "version": 1 }))
            .await,
        200,
    );
    assert_eq!(restored["module"]["sha256"], memory_sha);
    assert_eq!(restored["name"], "Gate");

    // The decision in flight finishes on the CPU module it began with...
    let snapshot: Snapshot =
        serde_json::from_value(json!({ "hosts": tour_hosts() })).expect("hosts");
    let request = PlaceRequest {
        vm: serde_json::from_value(vm()).expect("vm"),
        ..PlaceRequest::default()
    };
    let outcome = over_snapshot(&snapshot, &request, &in_flight.policy, &in_flight.overrides)
        .expect("decided");
    let gate = &outcome.picks[0].decision.explain.filters[0];
    assert_eq!(gate.unit, "Gate");
    assert_eq!(
        (gate.input, gate.survivors),
        (3, 1),
        "the CPU filter keeps only `big`"
    );
    // ...and the next decision runs the restored Memory module.
    assert_eq!(schedule(&admin, &cluster).await, ["small"]);

    let listed = expect_status(&admin.get(&format!("{unit}/versions")).await, 200);
    assert_eq!(
        versions(&listed),
        [
            (3, true, json!(1)),
            (2, false, Value::Null),
            (1, false, Value::Null)
        ]
    );
    assert_eq!(listed[0]["module"]["sha256"], memory_sha);

    // The current version, and one never kept, are not versions to restore.
    let reply = admin
        .post(&format!("{unit}/rollback"), &json!({ "version": 3 }))
        .await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (400, "invalid_value")
    );
    let reply = admin
        .post(&format!("{unit}/rollback"), &json!({ "version": 99 }))
        .await;
    assert_eq!((reply.status, reply.code().as_str()), (404, "not_found"));
    let reply = admin
        .post(&format!("{unit}/rollback"), &json!({ "versio": 1 }))
        .await;
    assert_eq!(reply.status, 400);

    // Built-in units list their versions but are not rolled back.
    let builtin = expect_status(&admin.get(UNITS).await, 200)
        .as_array()
        .expect("units")
        .iter()
        .find(|u| u["name"] == "Memory")
        .expect("the built-in Memory unit")["href"]
        .as_str()
        .expect("href")
        .to_owned();
    let listed = expect_status(&admin.get(&format!("{builtin}/versions")).await, 200);
    assert_eq!(versions(&listed), [(1, true, Value::Null)]);
    let reply = admin
        .post(&format!("{builtin}/rollback"), &json!({ "version": 1 }))
        .await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "unit_internal")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_a_policy_cannot_take_is_refused_and_changes_nothing() {
    let api = Api::start().await;
    let admin = api.admin();
    // Version 1 exports a filter only; version 2 a filter and a score, and
    // a policy then uses the unit as a weight.
    let (unit, _) = unit_on_a_cluster(&admin, "Flex", "memory").await;
    let current = expect_status(
        &admin
            .put_wasm(&format!("{unit}/module"), builtin_wasm("vm-affinity"))
            .await,
        200,
    );
    let policy = expect_status(
        &admin
            .post("/api/v1/schedulingpolicies", &json!({ "name": "weighs" }))
            .await,
        201,
    );
    expect_status(
        &admin
            .post(
                &format!(
                    "/api/v1/schedulingpolicies/{}/weights",
                    policy["id"].as_str().expect("id")
                ),
                &json!({ "scheduling_policy_unit": { "id": current["id"] }, "factor": 2 }),
            )
            .await,
        201,
    );
    let before = expect_status(&admin.get(&format!("{unit}/versions")).await, 200);

    let reply = admin
        .post(&format!("{unit}/rollback"), &json!({ "version": 1 }))
        .await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (422, "unit_type_mismatch")
    );
    let message = reply.json()["error"]["message"].clone();
    assert!(
        message.as_str().is_some_and(|m| m.contains("weighs")),
        "{message}"
    );
    assert_eq!(expect_status(&admin.get(&unit).await, 200), current);
    assert_eq!(
        expect_status(&admin.get(&format!("{unit}/versions")).await, 200),
        before
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_unit_keeps_only_its_newest_versions() {
    let api = Api::start_with(&["--unit-versions-retained", "2"]).await;
    let admin = api.admin();
    let (unit, _) = unit_on_a_cluster(&admin, "Kept", "memory").await;
    expect_status(
        &admin
            .put_wasm(&format!("{unit}/module"), builtin_wasm("cpu"))
            .await,
        200,
    );
    let third = distinct_copy(builtin_wasm("memory"), "third");
    expect_status(
        &admin.put_wasm(&format!("{unit}/module"), &third).await,
        200,
    );

    let listed = expect_status(&admin.get(&format!("{unit}/versions")).await, 200);
    assert_eq!(
        versions(&listed),
        [(3, true, Value::Null), (2, false, Value::Null)]
    );
    let reply = admin
        .post(&format!("{unit}/rollback"), &json!({ "version": 1 }))
        .await;
    assert_eq!((reply.status, reply.code().as_str()), (404, "not_found"));
    expect_status(
        &admin
            .post(&format!("{unit}/rollback"), &json!({ "version": 2 }))
            .await,
        200,
    );
}
