//! Issue #12, "Prestarted VM pools", over the real binary: a pool with
//! `prestarted_vms = 3` reaches three up-and-free members through start
//! operations a test engine leases and completes over HTTP; three failed
//! starts in a row make the next monitor run stop and report them, and the
//! run after retries; a prestarted VM is allocated at once; and all of it
//! holds across restarts in the middle (member states, the counted
//! failures, the assignment).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Client, Server, expect_status};

/// A second between monitor runs: long enough that the test engine fails
/// all three starts between two runs, short enough to wait for.
const FLAGS: &[&str] = &["--pool-monitor-interval-ms", "1000", "--retry-wait-ms", "0"];

const PATIENCE: Duration = Duration::from_secs(30);

fn counts(pool: &Value) -> (u64, u64, u64, u64) {
    let n = |k: &str| pool["vms"][k].as_u64().expect("a count");
    (n("down"), n("starting"), n("up"), n("assigned"))
}

fn wait_for(client: &Client, pool: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let body = expect_status(&client.get(pool), 200);
        if done(&body) {
            return body;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "waited for {what}; pool: {body:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The test engine: leases every queued operation first, then completes
/// each with `outcome`, so that all finish between two monitor runs.
fn engine(client: &Client, cluster: &str, outcome: &str) -> usize {
    let mut leased = Vec::new();
    loop {
        let reply = client.post(
            &format!("/api/v1/clusters/{cluster}/operations/lease"),
            &json!({ "holder": "e2e-engine", "wait_ms": 0 }),
        );
        if reply.status == 204 {
            break;
        }
        let body = expect_status(&reply, 200);
        assert_eq!(body["operation"]["kind"], "start");
        leased.push((
            body["operation"]["id"].as_str().expect("id").to_owned(),
            body["lease"]["id"].as_str().expect("lease").to_owned(),
        ));
    }
    for (op, lease) in &leased {
        expect_status(
            &client.post(
                &format!("/api/v1/clusters/{cluster}/operations/{op}/complete"),
                &json!({ "lease": lease, "outcome": outcome, "detail": "image not found" }),
            ),
            200,
        );
    }
    leased.len()
}

#[test]
fn a_prestarted_pool_fills_through_an_engine_survives_failed_starts_and_restarts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(dir.path(), FLAGS, &[]);
    let admin = server.admin();
    let cluster = expect_status(
        &admin.post("/api/v1/clusters", &json!({ "name": "vdi" })),
        201,
    )["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let hosts: Vec<Value> = (0..3)
        .map(|i| {
            json!({ "id": format!("h{i}"), "metrics": {
                "memory_total_mib": 32768.0, "memory_free_mib": 32768.0,
                "cpu_sockets": 2.0, "cpu_cores": 16.0, "cpu_threads": 32.0 } })
        })
        .collect();
    expect_status(
        &admin.put(
            &format!("/api/v1/clusters/{cluster}/inventory"),
            &json!({ "generation": 1, "hosts": hosts }),
        ),
        200,
    );
    let created = expect_status(
        &admin.post(
            "/api/v1/vmpools",
            &json!({ "name": "vdi", "cluster": { "id": cluster }, "size": 10,
                     "prestarted_vms": 3, "vm": { "memory_mib": 2048.0, "vcpus": 2 } }),
        ),
        201,
    );
    let pool = format!("/api/v1/vmpools/{}", created["id"].as_str().expect("id"));

    // Three starts queued; the engine fails all three.
    wait_for(&admin, &pool, "three starting", |p| counts(p).1 == 3);
    assert_eq!(engine(&admin, &cluster, "failed"), 3);
    let p = wait_for(&admin, &pool, "the failures counted", |p| {
        p["last_run"]["failures"]
            .as_array()
            .is_some_and(|f| f.len() == 3)
    });
    assert_eq!(p["last_run"]["stopped_early"], true, "{p:#}");
    assert_eq!(p["last_run"]["started"].as_array().map(Vec::len), Some(0));
    assert_eq!(counts(&p), (10, 0, 0, 0));
    let failed_run = p["last_run"]["at_ms"].as_u64();

    // A restart mid-way: the failures stay counted once, and the monitor
    // (which runs at start) retries. Its run is recorded after its starts:
    // wait for the record too, or the pool may be read in between.
    assert!(server.stop().success());
    let server = Server::start_with(dir.path(), FLAGS, &[]);
    let admin = server.admin();
    let p = wait_for(&admin, &pool, "a retry after the restart", |p| {
        counts(p).1 == 3 && p["last_run"]["at_ms"].as_u64() > failed_run
    });
    assert!(
        p["last_run"]["failures"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "{p:#}"
    );
    assert_eq!(engine(&admin, &cluster, "succeeded"), 3);
    let p = wait_for(&admin, &pool, "three up", |p| counts(p).2 == 3);
    assert_eq!(counts(&p), (7, 0, 3, 0));
    let claims = expect_status(
        &admin.get(&format!("/api/v1/clusters/{cluster}/claims")),
        200,
    );
    let claims = claims["claims"].as_array().expect("claims");
    assert_eq!(claims.len(), 3);
    assert!(
        claims.iter().all(|c| c["state"] == "confirmed"),
        "{claims:#?}"
    );

    // A prestarted VM is handed over at once: already up, nothing to start
    // (said by the answer, not timed: a timed assertion fails on a busy
    // machine).
    let got = expect_status(
        &admin.post(&format!("{pool}/allocatevm"), &json!({ "user": "ann" })),
        200,
    );
    assert_eq!(
        (got["ready"].as_bool(), got["vm"]["run_state"].as_str()),
        (Some(true), Some("up"))
    );
    let ann = got["vm"]["vm_id"].as_str().expect("id").to_owned();

    // Another restart: the assignment and the states are as they were,
    // and the monitor tops the pool up to three free again.
    assert!(server.stop().success());
    let server = Server::start_with(dir.path(), FLAGS, &[]);
    let admin = server.admin();
    let p = wait_for(&admin, &pool, "a top-up start", |p| counts(p).1 == 1);
    assert_eq!(counts(&p), (6, 1, 2, 1));
    let members = expect_status(&admin.get(&format!("{pool}/vms")), 200);
    let held = members
        .as_array()
        .expect("members")
        .iter()
        .find(|m| m["vm_id"] == ann.as_str())
        .expect("ann's VM");
    assert_eq!(
        (held["state"].as_str(), held["assigned_to"].as_str()),
        (Some("assigned"), Some("ann"))
    );
    assert_eq!(engine(&admin, &cluster, "succeeded"), 1);
    let p = wait_for(&admin, &pool, "three up and free again", |p| {
        counts(p).2 == 3
    });
    assert_eq!(counts(&p), (6, 0, 3, 1));
    assert!(server.stop().success());
}
