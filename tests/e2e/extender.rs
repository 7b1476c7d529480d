//! kube-scheduler's extender over the real binary (issue #14): with an
//! engine token, `filter` then `prioritize` on the survivors, as
//! kube-scheduler drives an extender that is not node cache capable
//! (`pkg/scheduler/extender.go`: the filter's `Nodes.items` become the
//! nodes sent to prioritize, and the highest weighted score wins), each
//! call well inside kube-scheduler's default 5 s extender timeout. The
//! request is the in-process golden test's (`tests/api/golden/extender`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, expect_status};

/// kube-scheduler's default `httpTimeout` for an extender.
const EXTENDER_TIMEOUT: Duration = Duration::from_secs(5);

#[test]
fn kube_scheduler_filters_then_prioritizes_the_survivors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let token = expect_status(
        &admin.post(
            "/api/v1/tokens",
            &json!({ "name": "kube-scheduler", "role": "engine" }),
        ),
        201,
    );
    let engine = server.client(token["secret"].as_str());
    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies"), 200);
    let nova = policies
        .as_array()
        .expect("policies")
        .iter()
        .find(|p| p["name"] == "nova_default")
        .expect("nova_default")["id"]
        .clone();
    expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "kube", "scheduling_policy": { "id": nova } }),
        ),
        201,
    );
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/api/golden/extender/filter_nodes.request.json");
    let args: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).expect("fixture")).expect("json");

    let started = Instant::now();
    let filtered = expect_status(&engine.post("/k8s/kube/filter", &args), 200);
    assert!(
        started.elapsed() < EXTENDER_TIMEOUT,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(filtered["Error"], "", "{filtered}");
    let survivors = filtered["Nodes"]["items"].clone();
    assert_eq!(survivors.as_array().map(Vec::len), Some(3), "{filtered}");
    let failed = filtered["FailedNodes"].as_object().expect("FailedNodes");
    assert!(failed.contains_key("worker-small"), "{filtered}");

    let started = Instant::now();
    let scores = expect_status(
        &engine.post(
            "/k8s/kube/prioritize",
            &json!({ "Pod": args["Pod"], "Nodes": { "items": survivors } }),
        ),
        200,
    );
    assert!(
        started.elapsed() < EXTENDER_TIMEOUT,
        "{:?}",
        started.elapsed()
    );
    let scores = scores.as_array().expect("a HostPriorityList");
    assert_eq!(scores.len(), 3);
    assert!(
        scores
            .iter()
            .all(|s| (0..=10).contains(&s["Score"].as_i64().expect("a score")))
    );
    let best = scores
        .iter()
        .max_by_key(|s| s["Score"].as_i64())
        .expect("a best node");
    assert_eq!(
        best["Host"], "worker-big",
        "the most free memory: {scores:?}"
    );

    // A reader may not ask.
    let reader = expect_status(
        &admin.post("/api/v1/tokens", &json!({ "name": "r", "role": "reader" })),
        201,
    );
    let reply = server
        .client(reader["secret"].as_str())
        .post("/k8s/kube/filter", &args);
    assert_eq!(reply.status, 403);
}

/// `--extender-listen`: a second address serving the extender routes
/// without a token (kube-scheduler's extender configuration cannot send
/// one), and nothing else.
#[test]
fn the_extender_listener_needs_no_token_and_serves_nothing_else() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let extender_addr = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(dir.path(), &["--extender-listen", &extender_addr], &[]);
    let admin = server.admin();
    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies"), 200);
    let nova = policies
        .as_array()
        .expect("policies")
        .iter()
        .find(|p| p["name"] == "nova_default")
        .expect("nova_default")["id"]
        .clone();
    expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "kube", "scheduling_policy": { "id": nova } }),
        ),
        201,
    );
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/api/golden/extender/filter_nodes.request.json");
    let args: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).expect("fixture")).expect("json");

    let kube_scheduler = crate::support::Client {
        addr: extender_addr.parse().expect("an address"),
        token: None,
    };
    let filtered = expect_status(&kube_scheduler.post("/k8s/kube/filter", &args), 200);
    assert_eq!(filtered["Error"], "", "{filtered}");
    assert_eq!(filtered["Nodes"]["items"].as_array().map(Vec::len), Some(3));
    let scores = expect_status(&kube_scheduler.post("/k8s/kube/prioritize", &args), 200);
    assert_eq!(scores.as_array().map(Vec::len), Some(7), "{scores}");
    // Nothing else is served there, with or without a token.
    assert_eq!(kube_scheduler.get("/api/v1/clusters").status, 404);
    let admin_there = crate::support::Client {
        addr: kube_scheduler.addr,
        token: admin.token.clone(),
    };
    assert_eq!(admin_there.get("/api/v1/clusters").status, 404);
    // The main listener still asks for a token.
    assert_eq!(
        server.client(None).post("/k8s/kube/filter", &args).status,
        401
    );
    assert!(server.stop().success(), "both listeners stop cleanly");
}
