//! Issue #11 over real HTTP: one cluster's storm cannot take the others
//! down, and failing units are visible at the top of an answer.
//!
//! * A cluster with as many decisions in progress as it may answers the
//!   next one 503 `cluster_busy` with `Retry-After` at once, while another
//!   cluster still answers. Decisions are held in progress by clients that
//!   send their headers but not yet their bodies (a decision is admitted
//!   before its body is read), so nothing here depends on timing.
//! * A fail-open weight that answers NaN leaves the decision `degraded`,
//!   in the answer and in the decisions log; a fail-closed one fails the
//!   request with 422 `score_failed` naming it.

use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{ADMIN_TOKEN, Client, Server, expect_status};

/// Decisions a cluster may have in progress in the busy-cluster test.
const MAX_IN_PROGRESS: usize = 2;

/// How long a test polls for the server to reach a state before failing.
const SETTLE: Duration = Duration::from_secs(30);

pub(crate) fn hosts(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "id": format!("h{i:04}"),
                "metrics": {
                    "memory_total_mib": 65536.0,
                    "memory_free_mib": 8192.0 + (i % 97) as f64 * 512.0,
                    "cpu_sockets": 2.0,
                    "cpu_cores": 16.0,
                    "cpu_threads": 32.0,
                },
            })
        })
        .collect()
}

pub(crate) fn schedule_body(vm: &str, n: usize) -> Value {
    json!({ "vm": { "id": vm, "memory_mib": 1024.0, "vcpus": 1 }, "hosts": hosts(n) })
}

pub(crate) fn cluster(admin: &Client, name: &str, policy: Option<&str>) -> String {
    let body = match policy {
        Some(id) => json!({ "name": name, "scheduling_policy": { "id": id } }),
        None => json!({ "name": name }),
    };
    let cluster = expect_status(&admin.post("/api/v1/clusters", &body), 201);
    format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"))
}

/// A request whose headers are sent and whose body is not (yet): the
/// server admits the decision and waits for the body.
fn stalled(server: &Server, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{",
        server.addr
    );
    stream.write_all(head.as_bytes()).expect("send headers");
    stream.flush().expect("flush");
    stream
}

/// What the server has already sent a stalled client, if anything (it
/// should have sent nothing: the decision waits for the body).
fn already_answered(stream: &TcpStream) -> String {
    use std::io::Read as _;
    let stream = stream.try_clone().expect("clone the stream");
    stream.set_nonblocking(true).expect("non-blocking");
    let mut buffer = [0u8; 512];
    let read = match (&stream).read(&mut buffer) {
        Ok(0) => "closed".to_owned(),
        Ok(n) => String::from_utf8_lossy(&buffer[..n]).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => "nothing".to_owned(),
        Err(e) => format!("error: {e}"),
    };
    let _ = stream.set_nonblocking(false);
    read
}

/// Polls `check` until it returns `Some`, or fails after [`SETTLE`].
fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < SETTLE, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_cluster_with_too_many_decisions_in_progress_is_busy_and_others_are_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bound = MAX_IN_PROGRESS.to_string();
    // The stalled bodies must outlast the test on a busy machine: the
    // body timeouts would otherwise end them, and their admissions, early.
    let server = Server::start_with(
        dir.path(),
        &[
            "--max-cluster-decisions",
            &bound,
            "--body-idle-timeout-secs",
            "600",
            "--body-read-timeout-secs",
            "600",
        ],
        &[],
    );
    let admin = server.admin();
    let busy = cluster(&admin, "busy", None);
    let calm = cluster(&admin, "calm", None);
    let path = format!("{busy}/schedule");

    let mut held: Vec<TcpStream> = (0..MAX_IN_PROGRESS)
        .map(|_| stalled(&server, &path))
        .collect();
    // Once both are admitted, the next decision is refused at once. The
    // server takes connections concurrently, so a poll can be admitted
    // before a stalled client's headers are read, and that client refused
    // instead: a stalled client the server already answered is replaced
    // before the next poll, until both hold their places.
    let started = Instant::now();
    let refused = loop {
        for stream in &mut held {
            if already_answered(stream) != "nothing" {
                *stream = stalled(&server, &path);
            }
        }
        let reply = admin.post(&path, &schedule_body("vm-extra", 3));
        if reply.status == 503 {
            break reply;
        }
        assert!(
            started.elapsed() < SETTLE,
            "the busy cluster never refused; the stalled clients read {:?}; log:\n{}",
            held.iter().map(already_answered).collect::<Vec<_>>(),
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(refused.code(), "cluster_busy");
    assert_eq!(refused.header("Retry-After"), Some("1"));
    assert_eq!(
        refused.json()["error"]["details"]["in_progress"],
        MAX_IN_PROGRESS
    );
    // A balance of the same cluster counts against the same bound.
    let balance = admin.post(&format!("{busy}/balance"), &json!({ "hosts": hosts(3) }));
    assert_eq!(
        (balance.status, balance.code()),
        (503, "cluster_busy".to_owned())
    );

    // Another cluster still decides.
    let answer = expect_status(
        &admin.post(&format!("{calm}/schedule"), &schedule_body("vm-calm", 3)),
        200,
    );
    assert!(answer["chosen_host"].is_string(), "{answer}");

    // The stalled clients go away; the busy cluster decides again.
    drop(held);
    eventually("the busy cluster answering again", || {
        let reply = admin.post(&path, &schedule_body("vm-later", 3));
        (reply.status == 200).then_some(())
    });
}

/// The hostile test unit (`tests/guests/hostile`), built from source once
/// per test run, as the server's build script builds the built-in units.
pub(crate) fn hostile_wasm() -> &'static [u8] {
    static BUILT: OnceLock<Vec<u8>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the host crate sits in the repository")
            .to_owned();
        let exe = std::env::current_exe().expect("the test's own path");
        let target = exe
            .ancestors()
            .nth(3)
            .expect("tests run from <target>/<profile>/deps")
            .to_owned();
        let builder = sandpiper_guest_build::Builder {
            manifest_dir: repo,
            out_dir: target.join("test-guests").join("hostile"),
            target_dir: None,
            cargo: std::env::var_os("CARGO").map_or_else(|| "cargo".into(), PathBuf::from),
            emit_rerun_if_changed: false,
        };
        let built = builder
            .build(&["sandpiper-test-hostile"])
            .unwrap_or_else(|error| panic!("building the hostile unit: {error}"));
        std::fs::read(&built[0].path).expect("the built hostile unit")
    })
}

/// A policy whose only unit is the hostile unit, as a weight answering
/// NaN for the first host, failing as `on_failure` says (the default when
/// `None`).
fn nan_policy(admin: &Client, unit_id: &str, name: &str, on_failure: Option<&str>) -> String {
    let policy = expect_status(
        &admin.post("/api/v1/schedulingpolicies", &json!({ "name": name })),
        201,
    );
    let id = policy["id"].as_str().expect("id").to_owned();
    let policy_path = format!("/api/v1/schedulingpolicies/{id}");
    let mut body = json!({ "scheduling_policy_unit": { "id": unit_id } });
    if let Some(on_failure) = on_failure {
        body["on_failure"] = json!(on_failure);
    }
    expect_status(&admin.post(&format!("{policy_path}/weights"), &body), 201);
    expect_status(
        &admin.put(
            &policy_path,
            &json!({ "properties": [{ "name": "mode", "value": "nan" }] }),
        ),
        200,
    );
    id
}

#[test]
fn a_failing_weight_degrades_the_decision_visibly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let unit = expect_status(
        &admin.post_wasm("/api/v1/schedulingpolicyunits?name=Hostile", hostile_wasm()),
        201,
    );
    let unit_id = unit["id"].as_str().expect("id");

    let open = nan_policy(&admin, unit_id, "nan-open", None);
    let cluster_path = cluster(&admin, "degraded", Some(&open));
    let answer = expect_status(
        &admin.post(
            &format!("{cluster_path}/schedule"),
            &schedule_body("vm-1", 3),
        ),
        200,
    );
    let degraded = json!([{ "unit": "Hostile", "role": "score", "kind": "invalid_output" }]);
    assert_eq!(answer["degraded"], degraded, "{answer}");
    assert!(answer["chosen_host"].is_string());
    let logged = expect_status(&admin.get(&format!("{cluster_path}/decisions")), 200);
    assert_eq!(logged[0]["answer"]["degraded"], degraded, "{logged}");

    // A decision where nothing failed says so with an empty list.
    let honest = cluster(&admin, "honest", None);
    let answer = expect_status(
        &admin.post(&format!("{honest}/schedule"), &schedule_body("vm-3", 3)),
        200,
    );
    assert_eq!(answer["degraded"], json!([]));

    // Fail-closed: the request fails, naming the weight, and nothing is
    // logged.
    let closed = nan_policy(&admin, unit_id, "nan-closed", Some("fail_closed"));
    let strict = cluster(&admin, "strict", Some(&closed));
    let refused = admin.post(&format!("{strict}/schedule"), &schedule_body("vm-4", 3));
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (422, "score_failed"),
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    let details = &refused.json()["error"]["details"];
    assert_eq!(details["unit"], "Hostile");
    assert_eq!(details["unit_error"], "invalid_output");
    let logged = expect_status(&admin.get(&format!("{strict}/decisions")), 200);
    assert_eq!(logged, json!([]));
}
