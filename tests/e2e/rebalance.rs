//! The periodic balance over the real binary (issue #12): a cluster on
//! `evenly_distributed` whose held inventory has an overloaded host gets,
//! within one interval, one `migrate` operation to a cooler host with a
//! claim on it, and no second one while that one is queued or leased, also
//! across a restart; once a test engine completes it, the claim is
//! confirmed and the rounds go on.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{
    Client, Server, expect_status, overloaded_hosts as hosts, overloaded_vms as vms,
};

/// The cluster's balance interval: short, so the test takes seconds.
const INTERVAL_SECONDS: u64 = 1;

/// How long the test waits for what should take an interval or two: far
/// more, so that a busy machine (CI's two cores running other tests)
/// only makes it slower, never wrong.
const PATIENCE: Duration = Duration::from_secs(20);

fn operations(admin: &Client, path: &str) -> Vec<Value> {
    expect_status(&admin.get(&format!("{path}/operations")), 200)["operations"]
        .as_array()
        .expect("operations")
        .clone()
}

fn decisions(admin: &Client, path: &str) -> Vec<Value> {
    expect_status(&admin.get(&format!("{path}/decisions?limit=500")), 200)
        .as_array()
        .expect("decisions")
        .clone()
}

/// Polls until `ready` holds, for at most `within`.
fn wait_for<T>(within: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_overloaded_host_yields_one_migration_and_no_second_until_it_completes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies"), 200);
    let evenly = policies
        .as_array()
        .expect("policies")
        .iter()
        .find(|p| p["name"] == "evenly_distributed")
        .expect("the built-in evenly_distributed policy")["id"]
        .clone();
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({
                "name": "balanced",
                "scheduling_policy": { "id": evenly },
                "balance": { "interval_seconds": INTERVAL_SECONDS },
            }),
        ),
        201,
    );
    assert_eq!(
        cluster["balance"],
        json!({ "enabled": true, "interval_seconds": INTERVAL_SECONDS })
    );
    let path = format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"));
    expect_status(
        &admin.put(
            &format!("{path}/inventory"),
            &json!({ "generation": 1, "hosts": hosts(), "vms": vms() }),
        ),
        200,
    );

    // Within one interval (plus the loop's tick and the round itself), one
    // migration off the hot host, with a claim on its destination.
    let interval = Duration::from_secs(INTERVAL_SECONDS);
    let queued = wait_for(PATIENCE, || {
        let ops = operations(&admin, &path);
        (!ops.is_empty()).then_some(ops)
    })
    .unwrap_or_else(|| panic!("no migration queued; log:\n{}", server.log()));
    assert_eq!(queued.len(), 1, "{queued:#?}");
    let op = &queued[0];
    assert_eq!(
        (&op["kind"], &op["state"]),
        (&json!("migrate"), &json!("queued"))
    );
    assert_eq!(op["vm_id"], "v2", "the least CPU-hungry VM moves: {op:#}");
    let destination = op["payload"]["destination_host"]
        .as_str()
        .expect("destination");
    assert!(["cool", "warm"].contains(&destination), "{op:#}");
    assert_eq!(op["payload"]["source_host"], "hot");
    let claims = expect_status(&admin.get(&format!("{path}/claims")), 200);
    assert_eq!(claims["claims"][0]["vm_id"], "v2", "{claims:#}");
    assert_eq!(claims["claims"][0]["host_id"], destination, "{claims:#}");

    // Rounds go on, but hold back while it is in flight; across a restart
    // (the process killed, not stopped) too.
    std::thread::sleep(interval * 2);
    drop(server);
    let server = Server::start(dir.path());
    let admin = server.admin();
    let rounds_before = decisions(&admin, &path).len();
    let held_back = wait_for(PATIENCE, || {
        let latest = decisions(&admin, &path);
        let held_back: Vec<Value> = latest
            .iter()
            .filter(|d| d["answer"]["outcome"] == "in_flight")
            .cloned()
            .collect();
        (latest.len() >= rounds_before + 2 && !held_back.is_empty()).then_some(held_back)
    })
    .expect("the rounds after the restart say why they hold back");
    let ops = operations(&admin, &path);
    assert_eq!(
        ops.len(),
        1,
        "no second migration while one is queued: {ops:#?}"
    );
    assert_eq!(held_back[0]["answer"]["operation_id"], op["id"]);

    // A test engine carries it out.
    let leased = expect_status(
        &admin.post(
            &format!("{path}/operations/lease"),
            &json!({ "holder": "test-engine", "wait_ms": 2000 }),
        ),
        200,
    );
    assert_eq!(leased["operation"]["id"], op["id"]);
    let lease = leased["lease"]["id"].clone();
    std::thread::sleep(interval * 2);
    assert_eq!(
        operations(&admin, &path).len(),
        1,
        "none while it is leased"
    );
    expect_status(
        &admin.post(
            &format!(
                "{path}/operations/{}/complete",
                op["id"].as_str().expect("id")
            ),
            &json!({ "lease": lease, "outcome": "succeeded" }),
        ),
        200,
    );
    let claims = expect_status(&admin.get(&format!("{path}/claims")), 200);
    assert_eq!(claims["claims"][0]["state"], "confirmed", "{claims:#}");

    // The engine reports the VM on its new host, and the hot host cooler:
    // the next rounds run again, and find nothing more worth moving.
    let mut reported = vms();
    for vm in reported.as_array_mut().expect("vms") {
        if vm["id"] == "v2" {
            vm["host"] = json!(destination);
        }
    }
    let mut cooler = hosts();
    cooler[0]["metrics"]["cpu_usage_percent"] = json!(50.0);
    cooler[0]["metrics"]["cpu_overloaded_minutes"] = json!(0.0);
    expect_status(
        &admin.put(
            &format!("{path}/inventory"),
            &json!({ "generation": 2, "hosts": cooler, "vms": reported }),
        ),
        200,
    );
    let after = decisions(&admin, &path).len();
    let ran = wait_for(PATIENCE, || {
        let latest = decisions(&admin, &path);
        (latest.len() > after && latest[0]["answer"]["outcome"] != "in_flight").then_some(latest)
    })
    .expect("a round after the migration completed");
    assert_eq!(ran[0]["kind"], "balance", "{:#}", ran[0]);
    assert_eq!(operations(&admin, &path).len(), 1, "nothing more queued");
}
