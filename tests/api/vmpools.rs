//! Prestarted VM pools (`/api/v1/vmpools`, `crate::pools`): the resource's
//! CRUD and validation (every refusal names its field and changes
//! nothing), allocating and returning members, and the monitor, which
//! tops a pool up through the cluster's policy with a claim and a `start`
//! operation per member and stops a run after three consecutive failures.
//! A test engine leases and completes the operations over the API.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Api, Client, expect_status};

/// The monitor's interval in these tests: short, so a test waits
/// tenths of a second for a run, not five minutes.
const FLAGS: &[&str] = &[
    "--pool-monitor-interval-ms",
    "100",
    // No delay-and-retry: a VM that does not fit fails at once.
    "--retry-wait-ms",
    "0",
];

/// Longest a test waits for the monitor.
const PATIENCE: Duration = Duration::from_secs(20);

async fn cluster_with_hosts(admin: &Client, name: &str) -> String {
    let cluster = expect_status(
        &admin
            .post("/api/v1/clusters", &json!({ "name": name }))
            .await,
        201,
    );
    let id = cluster["id"].as_str().expect("id").to_owned();
    let hosts: Vec<Value> = (0..3)
        .map(|i| {
            json!({
                "id": format!("h{i}"),
                "metrics": {
                    "memory_total_mib": 16384.0, "memory_free_mib": 16384.0,
                    "cpu_sockets": 2.0, "cpu_cores": 8.0, "cpu_threads": 16.0,
                },
            })
        })
        .collect();
    expect_status(
        &admin
            .put(
                &format!("/api/v1/clusters/{id}/inventory"),
                &json!({ "generation": 1, "hosts": hosts }),
            )
            .await,
        200,
    );
    id
}

fn pool_body(name: &str, cluster: &str, size: u32, prestarted: u32, memory_mib: f64) -> Value {
    json!({
        "name": name,
        "cluster": { "id": cluster },
        "size": size,
        "prestarted_vms": prestarted,
        "vm": { "memory_mib": memory_mib, "vcpus": 1 },
    })
}

async fn add_pool(admin: &Client, body: &Value) -> String {
    let pool = expect_status(&admin.post("/api/v1/vmpools", body).await, 201);
    format!("/api/v1/vmpools/{}", pool["id"].as_str().expect("id"))
}

async fn vms(client: &Client, pool: &str) -> Vec<Value> {
    expect_status(&client.get(&format!("{pool}/vms")).await, 200)
        .as_array()
        .expect("a list")
        .clone()
}

/// Polls `pool` until `done` holds for it (the pool as GET shows it).
async fn wait_for(client: &Client, pool: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let body = expect_status(&client.get(pool).await, 200);
        if done(&body) {
            return body;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "waited {PATIENCE:?} for {what}; pool: {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The test engine: leases every queued operation of the cluster and
/// completes it with `outcome`; returns the operations it finished.
async fn complete_all(client: &Client, cluster: &str, outcome: &str) -> Vec<Value> {
    let mut done = Vec::new();
    loop {
        let reply = client
            .post(
                &format!("/api/v1/clusters/{cluster}/operations/lease"),
                &json!({ "holder": "test-engine", "wait_ms": 0 }),
            )
            .await;
        if reply.status == 204 {
            return done;
        }
        let leased = expect_status(&reply, 200);
        let op = leased["operation"]["id"].as_str().expect("id").to_owned();
        let lease = leased["lease"]["id"].as_str().expect("lease").to_owned();
        expect_status(
            &client
                .post(
                    &format!("/api/v1/clusters/{cluster}/operations/{op}/complete"),
                    &json!({ "lease": lease, "outcome": outcome, "detail": "disk missing" }),
                )
                .await,
            200,
        );
        done.push(leased["operation"].clone());
    }
}

fn state_counts(pool: &Value) -> (u64, u64, u64, u64) {
    let v = &pool["vms"];
    let n = |k: &str| v[k].as_u64().expect("a count");
    (n("down"), n("starting"), n("up"), n("assigned"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_is_created_read_changed_and_deleted() {
    let api = Api::start_with(FLAGS).await;
    let admin = api.admin();
    let cluster = cluster_with_hosts(&admin, "crud").await;
    let pool = add_pool(&admin, &pool_body("desk", &cluster, 3, 0, 512.0)).await;

    let got = expect_status(&admin.get(&pool).await, 200);
    assert_eq!(
        (got["size"].as_u64(), got["prestarted_vms"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(got["cluster"]["id"], cluster.as_str());
    assert_eq!(got["stateful"], false);
    assert_eq!(state_counts(&got), (3, 0, 0, 0));
    let members = vms(&admin, &pool).await;
    let ids: Vec<&str> = members
        .iter()
        .map(|m| m["vm_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["desk-1", "desk-2", "desk-3"]);
    assert!(members.iter().all(|m| m["state"] == "down"));
    let listed = expect_status(&admin.get("/api/v1/vmpools").await, 200);
    assert_eq!(listed.as_array().map(Vec::len), Some(1));

    // Growing adds members; raising and then lowering prestarted_vms
    // says the lowering stops nothing.
    let changed = expect_status(
        &admin
            .put(
                &pool,
                &json!({ "size": 5, "prestarted_vms": 2, "description": "d" }),
            )
            .await,
        200,
    );
    assert_eq!(
        (changed["size"].as_u64(), changed["description"].as_str()),
        (Some(5), Some("d"))
    );
    assert_eq!(vms(&admin, &pool).await.len(), 5);
    let lowered = expect_status(
        &admin.put(&pool, &json!({ "prestarted_vms": 1 })).await,
        200,
    );
    let notes = lowered["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap_or_default()
            .contains("will not be shut down")),
        "{lowered:#}"
    );
    // Shrinking removes the highest free, down members first.
    expect_status(
        &admin
            .put(&pool, &json!({ "size": 4, "prestarted_vms": 0 }))
            .await,
        200,
    );
    assert_eq!(vms(&admin, &pool).await.len(), 4);

    // Readers read, only admins change.
    let token = expect_status(
        &admin
            .post("/api/v1/tokens", &json!({ "name": "r", "role": "reader" }))
            .await,
        201,
    );
    let reader = api.client(token["secret"].as_str());
    expect_status(&reader.get(&pool).await, 200);
    assert_eq!(reader.put(&pool, &json!({ "size": 2 })).await.status, 403);

    assert_eq!(admin.delete(&pool).await.status, 204);
    assert_eq!(admin.get(&pool).await.code(), "not_found");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_naming_the_field_and_nothing_changes() {
    let api = Api::start_with(FLAGS).await;
    let admin = api.admin();
    let cluster = cluster_with_hosts(&admin, "bad").await;
    let pool = add_pool(&admin, &pool_body("ok", &cluster, 2, 0, 512.0)).await;
    let unknown = "00000000-0000-4000-8000-000000000000";
    let long = "x".repeat(260);

    // (body, status, code, field)
    let adds: Vec<(Value, u16, &str, Option<&str>)> = vec![
        (
            pool_body("p", &cluster, 0, 0, 1.0),
            400,
            "invalid_value",
            Some("size"),
        ),
        (
            pool_body("p", &cluster, 1001, 0, 1.0),
            400,
            "invalid_value",
            Some("size"),
        ),
        (
            pool_body("p", &cluster, 2, 3, 1.0),
            422,
            "prestarted_above_size",
            Some("prestarted_vms"),
        ),
        (
            pool_body(" p", &cluster, 2, 0, 1.0),
            400,
            "invalid_value",
            Some("name"),
        ),
        (
            pool_body(&long, &cluster, 2, 0, 1.0),
            400,
            "invalid_value",
            Some("name"),
        ),
        (
            pool_body("p", &cluster, 2, 0, -1.0),
            400,
            "invalid_value",
            Some("vm.memory_mib"),
        ),
        (
            pool_body("OK", &cluster, 2, 0, 1.0),
            409,
            "name_taken",
            None,
        ),
        (pool_body("p", unknown, 2, 0, 1.0), 404, "not_found", None),
        (
            json!({ "name": "p", "cluster": { "id": cluster }, "size": 2, "vm": { "id": "x" } }),
            400,
            "invalid_value",
            Some("vm.id"),
        ),
        (
            json!({ "name": "p", "cluster": { "id": cluster }, "size": -1, "vm": {} }),
            400,
            "invalid_field",
            None,
        ),
        (
            json!({ "name": "p", "cluster": { "id": cluster }, "size": 1, "vm": {}, "colour": 1 }),
            400,
            "invalid_field",
            None,
        ),
    ];
    let before = (
        expect_status(&admin.get("/api/v1/vmpools").await, 200),
        vms(&admin, &pool).await,
    );
    for (body, status, code, field) in &adds {
        let reply = admin.post("/api/v1/vmpools", body).await;
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (*status, *code),
            "{body}"
        );
        if let Some(field) = field {
            assert_eq!(reply.json()["error"]["details"]["field"], *field, "{body}");
        }
    }
    let updates: Vec<(Value, u16, &str, Option<&str>)> = vec![
        (json!({ "size": 0 }), 400, "invalid_value", Some("size")),
        (json!({ "size": 1001 }), 400, "invalid_value", Some("size")),
        (
            json!({ "prestarted_vms": 3 }),
            422,
            "prestarted_above_size",
            Some("prestarted_vms"),
        ),
        (
            json!({ "name": "renamed" }),
            400,
            "invalid_value",
            Some("name"),
        ),
        (
            json!({ "cluster": { "id": cluster } }),
            400,
            "invalid_field",
            None,
        ),
    ];
    for (body, status, code, field) in &updates {
        let reply = admin.put(&pool, body).await;
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (*status, *code),
            "{body}"
        );
        if let Some(field) = field {
            assert_eq!(reply.json()["error"]["details"]["field"], *field, "{body}");
        }
    }
    let after = (
        expect_status(&admin.get("/api/v1/vmpools").await, 200),
        vms(&admin, &pool).await,
    );
    // Unchanged, but for the monitor's last run, which it writes.
    let strip = |mut v: Value| {
        for p in v.as_array_mut().into_iter().flatten() {
            p["last_run"] = Value::Null;
        }
        v
    };
    assert_eq!(strip(before.0), strip(after.0));
    assert_eq!(before.1, after.1);
}

#[tokio::test(flavor = "multi_thread")]
async fn allocation_gives_an_up_vm_at_once_starts_a_down_one_and_refuses_when_none_is_left() {
    let api = Api::start_with(FLAGS).await;
    let admin = api.admin();
    let cluster = cluster_with_hosts(&admin, "alloc").await;
    let pool = add_pool(&admin, &pool_body("seat", &cluster, 2, 1, 512.0)).await;

    // The monitor starts one member; the engine carries the start out.
    wait_for(&admin, &pool, "a start", |p| state_counts(p).1 == 1).await;
    assert_eq!(complete_all(&admin, &cluster, "succeeded").await.len(), 1);
    let up = wait_for(&admin, &pool, "one up", |p| state_counts(p).2 == 1).await;
    assert_eq!(state_counts(&up), (1, 0, 1, 0));

    // Up and free: handed over at once.
    let first = admin
        .post(&format!("{pool}/allocatevm"), &json!({ "user": "ann" }))
        .await;
    let first = expect_status(&first, 200);
    assert_eq!(first["ready"], true);
    assert_eq!(first["vm"]["state"], "assigned");
    assert_eq!(first["vm"]["assigned_to"], "ann");
    assert_eq!(first["vm"]["run_state"], "up");
    let first_vm = first["vm"]["vm_id"].as_str().expect("id").to_owned();

    // The monitor now starts the other to keep one prestarted; take it
    // while it starts (or, if it has not run yet, it is started for us).
    let second = admin
        .post(&format!("{pool}/allocatevm"), &json!({ "user": "bob" }))
        .await;
    let second = expect_status(&second, 202);
    assert_eq!(second["ready"], false);
    assert!(second["operation_id"].is_string());
    assert_eq!(second["vm"]["assigned_to"], "bob");

    // Nothing left: 409 and nothing changed.
    let members = vms(&admin, &pool).await;
    let refused = admin
        .post(&format!("{pool}/allocatevm"), &json!({ "user": "cy" }))
        .await;
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (409, "pool_exhausted")
    );
    assert_eq!(vms(&admin, &pool).await, members);

    // Bad users and unknown pools.
    let bad = admin
        .post(&format!("{pool}/allocatevm"), &json!({ "user": "" }))
        .await;
    assert_eq!(
        (bad.status, bad.json()["error"]["details"]["field"].as_str()),
        (400, Some("user"))
    );
    let missing = admin
        .post(
            "/api/v1/vmpools/00000000-0000-4000-8000-000000000000/allocatevm",
            &json!({ "user": "x" }),
        )
        .await;
    assert_eq!(missing.status, 404);

    // Size cannot go below the assigned members; the pool cannot go.
    let shrink = admin
        .put(&pool, &json!({ "size": 1, "prestarted_vms": 0 }))
        .await;
    assert_eq!(
        (shrink.status, shrink.code().as_str()),
        (409, "pool_vms_assigned")
    );
    assert_eq!(admin.delete(&pool).await.code(), "pool_vms_assigned");
    assert_eq!(vms(&admin, &pool).await.len(), 2);

    // Returned (a stateless pool): free and down again; twice is refused.
    let back = expect_status(
        &admin
            .post(&format!("{pool}/vms/{first_vm}/return"), &json!({}))
            .await,
        200,
    );
    assert_eq!(
        (back["state"].as_str(), back["assigned_to"].as_str()),
        (Some("down"), None)
    );
    let again = admin
        .post(&format!("{pool}/vms/{first_vm}/return"), &json!({}))
        .await;
    assert_eq!(
        (again.status, again.code().as_str()),
        (409, "vm_not_assigned")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_monitor_starts_members_through_the_policy_with_a_claim_and_a_start_each() {
    let api = Api::start_with(FLAGS).await;
    let admin = api.admin();
    let cluster = cluster_with_hosts(&admin, "top").await;
    let pool = add_pool(&admin, &pool_body("top", &cluster, 8, 3, 1024.0)).await;

    // The run is recorded after its starts: wait for both, or the pool
    // may be read between the last start and the record.
    let p = wait_for(&admin, &pool, "three starting and the run", |p| {
        state_counts(p).1 == 3 && !p["last_run"].is_null()
    })
    .await;
    assert_eq!(state_counts(&p), (5, 3, 0, 0));
    let run = &p["last_run"];
    assert_eq!(run["stopped_early"], false, "{p:#}");

    let members = vms(&admin, &pool).await;
    let starting: Vec<&Value> = members
        .iter()
        .filter(|m| m["state"] == "starting")
        .collect();
    let claims = expect_status(
        &admin
            .get(&format!("/api/v1/clusters/{cluster}/claims"))
            .await,
        200,
    );
    let decisions = expect_status(
        &admin
            .get(&format!("/api/v1/clusters/{cluster}/decisions?limit=50"))
            .await,
        200,
    );
    for m in &starting {
        let vm_id = m["vm_id"].as_str().expect("id");
        let host = m["host_id"].as_str().expect("placed");
        let claim = claims["claims"]
            .as_array()
            .expect("claims")
            .iter()
            .find(|c| c["vm_id"] == vm_id)
            .unwrap_or_else(|| panic!("no claim for {vm_id}: {claims:#}"));
        assert_eq!(claim["host_id"], host);
        let decision = decisions
            .as_array()
            .expect("decisions")
            .iter()
            .find(|d| d["vm_id"] == vm_id)
            .unwrap_or_else(|| panic!("no decision for {vm_id}"));
        assert_eq!(
            (decision["kind"].as_str(), decision["host_id"].as_str()),
            (Some("schedule"), Some(host))
        );
        assert_eq!(claim["decision_id"], decision["id"]);
        let op = expect_status(
            &admin
                .get(&format!(
                    "/api/v1/clusters/{cluster}/operations/{}",
                    m["start_operation_id"].as_str().expect("op")
                ))
                .await,
            200,
        );
        assert_eq!(op["kind"], "start");
        assert_eq!(op["payload"]["host_id"], host);
        assert_eq!(op["payload"]["vm"]["id"], vm_id);
        // The start's decision kept its request, as an engine's does.
        let replay = expect_status(
            &admin
                .post(
                    &format!(
                        "/api/v1/clusters/{cluster}/decisions/{}/replay",
                        decision["id"].as_str().expect("id")
                    ),
                    &json!({}),
                )
                .await,
            200,
        );
        assert_eq!(replay["replay"]["vm_id"], vm_id, "{replay:#}");
    }

    // Engine done: three up and free, and no more starts.
    assert_eq!(complete_all(&admin, &cluster, "succeeded").await.len(), 3);
    let p = wait_for(&admin, &pool, "three up", |p| state_counts(p).2 == 3).await;
    assert_eq!(state_counts(&p), (5, 0, 3, 0));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        state_counts(&expect_status(&admin.get(&pool).await, 200)),
        (5, 0, 3, 0)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_start_the_queue_refuses_leaves_the_member_down_with_no_claim() {
    // Room for one queued operation: the second member's start is refused.
    let flags = [FLAGS, &["--max-queued-operations", "1"]].concat();
    let api = Api::start_with(&flags).await;
    let admin = api.admin();
    let cluster = cluster_with_hosts(&admin, "full").await;
    let pool = add_pool(&admin, &pool_body("full", &cluster, 2, 2, 1024.0)).await;

    let p = wait_for(&admin, &pool, "a run that failed a start", |p| {
        p["last_run"]["failures"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    })
    .await;
    assert_eq!(state_counts(&p), (1, 1, 0, 0), "{p:#}");
    let members = vms(&admin, &pool).await;
    let down = members
        .iter()
        .find(|m| m["state"] == "down")
        .expect("one member down");
    assert_eq!(down["start_operation_id"], Value::Null, "{down:#}");
    assert_eq!(down["host_id"], Value::Null, "{down:#}");
    let starting = members
        .iter()
        .find(|m| m["state"] == "starting")
        .expect("one member starting");
    // The monitor tries the down member again every 100 ms, and each try
    // claims a host for a moment before the queue refuses it and the claim
    // is released: so the claims are read until they settle. A refused
    // start whose claim were kept would never settle.
    let started = Instant::now();
    loop {
        let claims = expect_status(
            &admin
                .get(&format!("/api/v1/clusters/{cluster}/claims"))
                .await,
            200,
        );
        let claimed: Vec<Value> = claims["claims"]
            .as_array()
            .expect("claims")
            .iter()
            .map(|c| c["vm_id"].clone())
            .collect();
        if claimed == [starting["vm_id"].clone()] {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the refused start's claim is gone: claimed {claimed:?}, starting {}",
            starting["vm_id"]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_consecutive_failures_stop_a_run_and_are_reported() {
    // A second between runs, so that the test engine fails all three
    // starts between two runs (creating a pool triggers one at once).
    let api =
        Api::start_with(&["--pool-monitor-interval-ms", "1000", "--retry-wait-ms", "0"]).await;
    let admin = api.admin();
    let cluster = cluster_with_hosts(&admin, "fail").await;

    // No host can hold the VM: every placement fails; a run stops after
    // three and starts nothing.
    let big = add_pool(&admin, &pool_body("big", &cluster, 10, 5, 1.0e7)).await;
    let p = wait_for(&admin, &big, "a run", |p| !p["last_run"].is_null()).await;
    let run = &p["last_run"];
    assert_eq!(run["stopped_early"], true, "{p:#}");
    assert_eq!(run["started"].as_array().map(Vec::len), Some(0));
    let failures = run["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 3, "{run:#}");
    assert!(
        failures
            .iter()
            .all(|f| f["kind"] == "placement" && f["code"] == "pool_vm_not_placed")
    );
    assert_eq!(state_counts(&p), (10, 0, 0, 0));
    admin.put(&big, &json!({ "prestarted_vms": 0 })).await;

    // Starts that the engine reports failed: the next run counts three
    // and stops; the run after that tries again.
    let pool = add_pool(&admin, &pool_body("flaky", &cluster, 6, 3, 512.0)).await;
    wait_for(&admin, &pool, "three starting", |p| state_counts(p).1 == 3).await;
    assert_eq!(complete_all(&admin, &cluster, "failed").await.len(), 3);
    let p = wait_for(&admin, &pool, "the failures counted", |p| {
        p["last_run"]["failures"]
            .as_array()
            .is_some_and(|f| f.len() == 3)
    })
    .await;
    let run = &p["last_run"];
    assert_eq!(run["stopped_early"], true, "{p:#}");
    assert_eq!(run["started"].as_array().map(Vec::len), Some(0));
    assert!(
        run["failures"]
            .as_array()
            .expect("failures")
            .iter()
            .all(|f| f["kind"] == "start"
                && f["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("disk missing"))
    );
    // Their claims were released by the queue.
    let claims = expect_status(
        &admin
            .get(&format!("/api/v1/clusters/{cluster}/claims"))
            .await,
        200,
    );
    assert!(
        claims["claims"].as_array().expect("claims").is_empty(),
        "{claims:#}"
    );
    // Counted once: the next run starts three again. A run records itself
    // after its starts, so wait for the record rather than the members.
    let failed_run = run["at_ms"].as_u64().expect("at_ms");
    let p = wait_for(&admin, &pool, "a retry", |p| {
        p["last_run"]["at_ms"].as_u64() > Some(failed_run)
    })
    .await;
    assert_eq!(p["last_run"]["stopped_early"], false, "{p:#}");
    assert_eq!(p["last_run"]["started"].as_array().map(Vec::len), Some(3));
    assert_eq!(state_counts(&p).1, 3);
}
