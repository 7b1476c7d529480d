//! `POST /api/v1/simulations` (issue #18): the simulator over stored
//! policies. The report is the one `sandpiper simulate -o json` prints for
//! the same cluster, trace and policies (the built-in policies are stored
//! at every start), byte for byte apart from the stored policies' ids;
//! bad input is refused naming the field; the route needs a token.

use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Api, expect_status, policy_id, simulation_cluster};

#[tokio::test(flavor = "multi_thread")]
async fn a_simulation_answers_the_command_lines_report() {
    let api = Api::start().await;
    let admin = api.admin();
    let even = policy_id(&admin, "evenly_distributed").await;
    let packed = policy_id(&admin, "power_saving").await;
    let body = json!({
        "snapshot": simulation_cluster(),
        "trace": {"generate": {"seed": 7, "arrivals": 80}},
        "policies": [even, packed],
    });
    let first = admin.post("/api/v1/simulations", &body).await;
    let report = expect_status(&first, 200);
    let second = admin.post("/api/v1/simulations", &body).await;
    assert_eq!(first.body, second.body, "the same inputs, other bytes");

    assert_eq!(report["trace"]["seed"], 7);
    let policies = report["policies"].as_array().expect("policies");
    assert_eq!(policies[0]["policy"], "evenly_distributed");
    assert_eq!(policies[0]["policy_id"], even.as_str());
    let stddev = |p: &Value| p["final"]["memory"]["stddev"].as_f64().expect("stddev");
    let empty = |p: &Value| p["final"]["empty_hosts"].as_u64().expect("empty");
    assert!(stddev(&policies[0]) < stddev(&policies[1]), "{report}");
    assert!(empty(&policies[1]) > empty(&policies[0]), "{report}");

    // The command line, on the same cluster and trace, with the built-in
    // policies of the same names: the same report.
    let dir = tempfile::tempdir().expect("temp dir");
    let snapshot = dir.path().join("cluster.json");
    std::fs::write(&snapshot, simulation_cluster().to_string()).expect("write");
    // The compiled units' cache every test server and command shares
    // (written whole or not at all): compiling every unit of both policies
    // again would be most of this test's time.
    let cache = crate::support::unit_cache_dir();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_sandpiper"))
            .args(["simulate", "--cluster-snapshot"])
            .arg(&snapshot)
            .args(["--policy", "evenly_distributed", "--policy", "power_saving"])
            .args(["--seed", "7", "--arrivals", "80", "-o", "json"])
            .env("SANDPIPER_CACHE_DIR", &cache)
            .output()
            .expect("run sandpiper simulate")
    })
    .await
    .expect("the command");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut offline: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    for (p, id) in [(0, &even), (1, &packed)] {
        offline["policies"][p]["policy_id"] = json!(id);
    }
    assert_eq!(offline, report);

    // The page, for the console's "open as HTML".
    let page = admin
        .send(
            "POST",
            "/api/v1/simulations?format=html",
            Some(body.to_string().into_bytes()),
            Some("application/json"),
            &[],
        )
        .await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .is_some_and(|t| t.starts_with("text/html"))
    );
    assert!(String::from_utf8_lossy(&page.body).contains("<svg"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_simulation_is_refused_naming_the_field() {
    let api = Api::start().await;
    let admin = api.admin();
    let even = policy_id(&admin, "evenly_distributed").await;
    let refused = async |body: Value, status: u16, code: &str, field: &str| {
        let reply = admin.post("/api/v1/simulations", &body).await;
        let error = expect_status(&reply, status);
        assert_eq!(error["error"]["code"], code, "{error}");
        assert_eq!(error["error"]["details"]["field"], field, "{error}");
    };
    let arrive = |at: u64, id: &str, memory: i64| json!({"at_s": at, "event": "arrive", "vm": {"id": id, "memory_mib": memory}});
    refused(
        json!({"snapshot": simulation_cluster(), "policies": [even],
               "trace": {"events": [arrive(0, "a", 1024), arrive(5, "b", -1)]}}),
        400,
        "invalid_value",
        "trace.events[1].vm.memory_mib",
    )
    .await;
    refused(
        json!({"snapshot": simulation_cluster(), "policies": [even],
               "trace": {"events": [arrive(9, "a", 1024), arrive(5, "b", 1024)]}}),
        400,
        "invalid_value",
        "trace.events[1].at_s",
    )
    .await;
    refused(
        json!({"snapshot": simulation_cluster(), "policies": [even],
               "trace": {"generate": {"arrivals": 0}}}),
        400,
        "invalid_value",
        "trace.generate.arrivals",
    )
    .await;
    refused(
        json!({"snapshot": simulation_cluster(), "policies": [],
               "trace": {"generate": {}}}),
        400,
        "invalid_value",
        "policies",
    )
    .await;
    refused(
        json!({"policies": [even], "trace": {"generate": {}}}),
        400,
        "invalid_value",
        "cluster_id",
    )
    .await;
    refused(
        json!({"snapshot": {"hosts": [{"id": "h", "metrics": {"memory_total_mib": -1}}]},
               "policies": [even], "trace": {"generate": {}}}),
        400,
        "invalid_value",
        "snapshot.hosts[0].metrics.memory_total_mib",
    )
    .await;
    // Too much work: 1,000 hosts times about 40,000 events.
    let many: Vec<Value> = (0..1000).map(|i| json!({"id": format!("h{i}")})).collect();
    refused(
        json!({"snapshot": {"hosts": many}, "policies": [even],
               "trace": {"generate": {"arrivals": 20000}}}),
        400,
        "invalid_value",
        "trace",
    )
    .await;
    let unknown = admin
        .post(
            "/api/v1/simulations",
            &json!({"snapshot": simulation_cluster(), "trace": {"generate": {}},
                    "policies": ["00000000-0000-4000-8000-00000000beef"]}),
        )
        .await;
    assert_eq!(expect_status(&unknown, 404)["error"]["code"], "not_found");

    // A cluster with no inventory held.
    let cluster_id = expect_status(
        &admin
            .post("/api/v1/clusters", &json!({"name": "empty"}))
            .await,
        201,
    )["id"]
        .clone();
    let none = admin
        .post(
            "/api/v1/simulations",
            &json!({"cluster_id": cluster_id, "trace": {"generate": {}}, "policies": [even]}),
        )
        .await;
    assert_eq!(expect_status(&none, 409)["error"]["code"], "no_inventory");

    // No token, no simulation.
    let anonymous = api
        .client(None)
        .post(
            "/api/v1/simulations",
            &json!({"snapshot": simulation_cluster(), "trace": {"generate": {}}, "policies": [even]}),
        )
        .await;
    assert_eq!(
        expect_status(&anonymous, 401)["error"]["code"],
        "unauthenticated"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_simulation_starts_from_a_held_simulation_cluster() {
    let api = Api::start().await;
    let admin = api.admin();
    let packed = policy_id(&admin, "power_saving").await;
    let cluster_id = expect_status(
        &admin
            .post("/api/v1/clusters", &json!({"name": "held"}))
            .await,
        201,
    )["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut snapshot = simulation_cluster();
    snapshot["generation"] = json!(1);
    expect_status(
        &admin
            .put(
                &format!("/api/v1/clusters/{cluster_id}/inventory"),
                &snapshot,
            )
            .await,
        200,
    );
    let report = expect_status(
        &admin
            .post(
                "/api/v1/simulations",
                // The largest intervals: one sample at the start, one at
                // the end, and no balancing round.
                &json!({"cluster_id": cluster_id, "policies": [packed],
                        "trace": {"generate": {"seed": 1, "arrivals": 20}},
                        "sample_every_s": u64::MAX, "balance_every_s": u64::MAX}),
            )
            .await,
        200,
    );
    assert_eq!(report["hosts"], 20);
    assert_eq!(report["policies"][0]["placed"], 20, "{report}");
    assert_eq!(
        report["policies"][0]["samples"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(report["policies"][0]["migrations"], 0);
    // The cluster itself took nothing.
    let claims = expect_status(
        &admin
            .get(&format!("/api/v1/clusters/{cluster_id}/claims"))
            .await,
        200,
    );
    assert_eq!(
        claims["claims"].as_array().map(Vec::len),
        Some(0),
        "{claims}"
    );
}
