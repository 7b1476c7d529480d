//! Issue #15's metrics and logs over real HTTP, against the real binary:
//!
//! * `GET /metrics` (with a reader token) parsed by
//!   `prom_text_format_parser`, a strict parser of Prometheus' text format
//!   written apart from our encoder:
//!   decisions counted by cluster and result, a unit that traps counted
//!   by unit, role and kind, the held inventory and its claims, uploads'
//!   compile time, and HTTP requests by route template and status; no
//!   label carries a VM or host id.
//! * Request ids: the one a client sends comes back in `X-Request-Id`, in
//!   an error body and in the server's log; a malformed one is replaced.
//! * `--log-format json` writes one JSON object per line.

use prom_text_format_parser::{Sample, Scrape, ValueType};
use serde_json::{Value, json};

use crate::hardening_load::{cluster, hostile_wasm, hosts, schedule_body};
use crate::support::{Client, Reply, Server, expect_status};

/// A reader token for the scrape, as docs/metrics.md tells operators.
fn reader(server: &Server, name: &str) -> Client {
    let admin = server.admin();
    let created = expect_status(
        &admin.post("/api/v1/tokens", &json!({ "name": name, "role": "reader" })),
        201,
    );
    server.client(created["secret"].as_str())
}

/// Scrapes `/metrics` and parses it; the parser refuses anything that is
/// not Prometheus' text format.
fn scrape(client: &Client) -> Scrape {
    let reply = client.get("/metrics");
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = String::from_utf8(reply.body).expect("the exposition is UTF-8");
    Scrape::parse(&text).unwrap_or_else(|e| panic!("not Prometheus' text format ({e:?}):\n{text}"))
}

fn label<'s>(sample: &'s Sample, key: &str) -> Option<&'s str> {
    sample
        .labels
        .iter()
        .find(|l| l.key == key)
        .map(|l| l.value.as_str())
}

/// The samples of the family `name` (a histogram by its base name) of
/// `kind` (a value or bucket, a sum, a count) whose labels include
/// `labels`.
fn samples<'s>(
    scrape: &'s Scrape,
    name: &str,
    kind: ValueType,
    labels: &[(&str, &str)],
) -> Vec<&'s Sample> {
    scrape
        .metrics
        .iter()
        .filter(|m| m.name == name)
        .flat_map(|m| &m.samples)
        .filter(|s| {
            s.value.value_type == kind && labels.iter().all(|(k, v)| label(s, k) == Some(*v))
        })
        .collect()
}

/// The value of the one sample of `name` with `labels` (0 when there is
/// none yet, as for a counter not counted yet).
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    one(
        samples(scrape, name, ValueType::Sample, labels),
        name,
        labels,
    )
}

/// The observations of the one histogram `name` with `labels`.
fn count(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    one(
        samples(scrape, name, ValueType::Count, labels),
        name,
        labels,
    )
}

fn one(found: Vec<&Sample>, name: &str, labels: &[(&str, &str)]) -> f64 {
    assert!(found.len() <= 1, "{name} {labels:?} matches {found:?}");
    found.first().map_or(0.0, |s| s.value.value.as_f64())
}

/// Upload the hostile unit and make a cluster whose only weight is it,
/// panicking in every call (a trap), fail-open (the default).
fn trapping_cluster(admin: &Client) -> String {
    let unit = expect_status(
        &admin.post_wasm("/api/v1/schedulingpolicyunits?name=Hostile", hostile_wasm()),
        201,
    );
    let policy = expect_status(
        &admin.post("/api/v1/schedulingpolicies", &json!({ "name": "traps" })),
        201,
    );
    let policy_path = format!(
        "/api/v1/schedulingpolicies/{}",
        policy["id"].as_str().expect("id")
    );
    expect_status(
        &admin.post(
            &format!("{policy_path}/weights"),
            &json!({ "scheduling_policy_unit": { "id": unit["id"] } }),
        ),
        201,
    );
    expect_status(
        &admin.put(
            &policy_path,
            &json!({ "properties": [{ "name": "mode", "value": "panic" }] }),
        ),
        200,
    );
    cluster(admin, "trapping", policy["id"].as_str())
}

#[test]
fn metrics_count_decisions_trapped_units_held_state_and_requests() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let prometheus = reader(&server, "prometheus");

    // A scrape needs a token; a reader's is enough.
    assert_eq!(server.client(None).get("/metrics").status, 401);
    let before = scrape(&prometheus);
    let schedule_route = [
        ("method", "POST"),
        ("route", "/api/v1/clusters/{id}/schedule"),
        ("status", "200"),
    ];
    let schedules_before = value(&before, "sandpiper_http_requests_total", &schedule_route);

    // Three decisions that place, one that cannot.
    let honest = cluster(&admin, "honest", None);
    let honest_id = honest.rsplit('/').next().expect("an id").to_owned();
    for vm in ["vm-a", "vm-b", "vm-c"] {
        let answer = expect_status(
            &admin.post(&format!("{honest}/schedule"), &schedule_body(vm, 3)),
            200,
        );
        assert!(answer["chosen_host"].is_string(), "{answer}");
    }
    let too_big = json!({
        "vm": { "id": "vm-huge", "memory_mib": 1.0e9, "vcpus": 1 },
        "hosts": hosts(3),
    });
    let answer = expect_status(&admin.post(&format!("{honest}/schedule"), &too_big), 200);
    assert!(answer["chosen_host"].is_null(), "{answer}");

    // A unit that traps, left out of a decision that goes on.
    let trapping = trapping_cluster(&admin);
    let answer = expect_status(
        &admin.post(&format!("{trapping}/schedule"), &schedule_body("vm-t", 3)),
        200,
    );
    assert_eq!(
        answer["degraded"],
        json!([{ "unit": "Hostile", "role": "score", "kind": "trap" }]),
        "{answer}"
    );

    // The held inventory and a claim on it.
    expect_status(
        &admin.put(
            &format!("{honest}/inventory"),
            &json!({ "generation": 1, "hosts": hosts(4) }),
        ),
        200,
    );
    let placed = expect_status(
        &admin.post(
            &format!("{honest}/schedule"),
            &json!({ "vm": { "id": "vm-held", "memory_mib": 1024.0, "vcpus": 1 } }),
        ),
        200,
    );
    assert!(placed["chosen_host"].is_string(), "{placed}");

    let after = scrape(&prometheus);
    let attempts = |result: &str| {
        let labels = [("cluster", honest_id.as_str()), ("result", result)];
        count(
            &after,
            "sandpiper_scheduling_attempt_duration_seconds",
            &labels,
        )
    };
    assert_eq!(attempts("scheduled"), 4.0);
    assert_eq!(attempts("unschedulable"), 1.0);
    assert_eq!(attempts("error"), 0.0);
    let inf = samples(
        &after,
        "sandpiper_scheduling_attempt_duration_seconds",
        ValueType::Sample,
        &[
            ("cluster", honest_id.as_str()),
            ("result", "scheduled"),
            ("le", "+Inf"),
        ],
    );
    assert_eq!(inf.len(), 1, "the decisions' histogram: {inf:?}");
    assert_eq!(inf[0].value.value.as_f64(), 4.0);

    let hostile = [("unit", "Hostile"), ("role", "score"), ("kind", "trap")];
    assert_eq!(
        value(&after, "sandpiper_unit_execution_failures_total", &hostile),
        1.0
    );
    assert_eq!(
        value(&after, "sandpiper_unit_executions_skipped_total", &hostile),
        1.0
    );
    let hostile_calls = [("unit", "Hostile"), ("role", "score")];
    assert_eq!(
        count(
            &after,
            "sandpiper_unit_execution_duration_seconds",
            &hostile_calls
        ),
        1.0
    );
    assert_eq!(
        count(&after, "sandpiper_unit_execution_fuel", &hostile_calls),
        1.0
    );
    // The built-in filters of the default policy ran in every decision.
    let filtered = samples(
        &after,
        "sandpiper_unit_execution_duration_seconds",
        ValueType::Count,
        &[("role", "filter")],
    )
    .into_iter()
    .map(|s| s.value.value.as_f64())
    .fold(0.0, f64::max);
    assert!(filtered >= 5.0, "filter calls counted: {filtered}");

    let held = [("cluster", honest_id.as_str())];
    assert_eq!(value(&after, "sandpiper_inventory_hosts", &held), 4.0);
    assert_eq!(value(&after, "sandpiper_claims_pending", &held), 1.0);
    assert!(
        value(
            &after,
            "sandpiper_inventory_last_update_timestamp_seconds",
            &held
        ) > 1.0e9
    );
    assert!(
        count(
            &after,
            "sandpiper_unit_compile_duration_seconds",
            &[("result", "ok")]
        ) >= 1.0
    );

    // Requests by route template and status, never by raw path.
    assert_eq!(
        value(&after, "sandpiper_http_requests_total", &schedule_route) - schedules_before,
        6.0
    );
    assert!(
        value(
            &after,
            "sandpiper_http_requests_total",
            &[("method", "GET"), ("route", "/metrics"), ("status", "401")]
        ) >= 1.0
    );
    for metric in &after.metrics {
        for sample in &metric.samples {
            let labels = sample.labels.to_string();
            for id in ["vm-", "h000"] {
                assert!(
                    !labels.contains(id),
                    "{} has an id label: {labels}",
                    metric.name
                );
            }
            if let Some(route) = label(sample, "route") {
                assert!(
                    !route.contains(&honest_id),
                    "a raw path as a route: {route}"
                );
            }
        }
    }
}

/// The log lines of `server` that mention `needle`.
fn log_lines(server: &Server, needle: &str) -> Vec<String> {
    server
        .log()
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

fn get_with_id(client: &Client, path: &str, id: &str) -> Reply {
    client.send("GET", path, None, None, &[("X-Request-Id", id)])
}

#[test]
fn request_ids_come_back_in_headers_error_bodies_and_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();

    // An error: its body and header carry the id sent, and so does the
    // access line in the log.
    let missing = "/api/v1/clusters/00000000-0000-4000-8000-000000000000";
    let reply = get_with_id(&admin, missing, "e2e-request-404");
    assert_eq!(reply.status, 404);
    assert_eq!(reply.header("x-request-id"), Some("e2e-request-404"));
    assert_eq!(reply.json()["request_id"], "e2e-request-404");
    let lines = log_lines(&server, "e2e-request-404");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("status=404") && l.contains("/api/v1/clusters/{id}")),
        "no access line for the request in:\n{}",
        server.log()
    );

    // A success carries one too; an id we cannot log as sent is replaced.
    let reply = get_with_id(&admin, "/api/v1/clusters", "e2e-request-200");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-request-id"), Some("e2e-request-200"));
    let reply = get_with_id(&admin, "/api/v1/clusters", "two words");
    let generated = reply.header("x-request-id").expect("an id").to_owned();
    assert_ne!(generated, "two words");
    assert_eq!(generated.len(), 32, "{generated}");
    let reply = server.client(None).get("/api/v1/clusters");
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.json()["request_id"].as_str(),
        reply.header("x-request-id")
    );

    // Tokens created and revoked are logged by name and role, never with
    // their secret.
    let created = expect_status(
        &admin.post(
            "/api/v1/tokens",
            &json!({ "name": "logged-token", "role": "engine" }),
        ),
        201,
    );
    let secret = created["secret"].as_str().expect("a secret");
    let revoke = format!("/api/v1/tokens/{}", created["id"].as_str().expect("id"));
    assert_eq!(admin.delete(&revoke).status, 204);
    let log = server.log();
    assert!(!log.contains(secret), "the secret was logged");
    let token_lines = log_lines(&server, "logged-token");
    for what in ["token created", "token revoked"] {
        assert!(
            token_lines
                .iter()
                .any(|l| l.contains(what) && l.contains("engine")),
            "no `{what}` line in:\n{log}"
        );
    }
}

#[test]
fn json_logs_are_one_object_per_line_with_the_request_span() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(dir.path(), &["--log-format", "json"], &[]);
    let admin = server.admin();
    let reply = get_with_id(&admin, "/api/v1/clusters", "e2e-json-1");
    assert_eq!(reply.status, 200);
    // SIGTERM: every line is written before the process exits.
    let log = server.log();
    assert!(server.stop().success());
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let access = lines
        .iter()
        .find(|l| l["span"]["request_id"] == "e2e-json-1" && l["fields"]["message"] == "request")
        .unwrap_or_else(|| panic!("no access line in:\n{log}"));
    assert_eq!(access["target"], "sandpiper::access");
    assert_eq!(access["fields"]["status"], 200);
    assert_eq!(access["fields"]["route"], "/api/v1/clusters");
    assert_eq!(access["span"]["method"], "GET");
}
