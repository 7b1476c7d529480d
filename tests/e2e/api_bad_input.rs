//! Every bad input gets its documented status and error code, in the one
//! error shape, and leaves the store exactly as it was (a dump of every
//! table before and after must match).

use serde_json::json;

use crate::api_tour::tour_hosts;
use crate::support::{Client, Reply, Server, builtin_wasm, dump, expect_status, unit_id};

/// The upload cap the test server runs with, MiB: small, so the oversized
/// body is quick to send.
const UPLOAD_CAP_MIB: usize = 1;

/// A component written as WebAssembly text: compiled by `wat`.
fn component(text: &str) -> Vec<u8> {
    wat::parse_str(text).expect("valid WebAssembly text")
}

struct Case {
    what: &'static str,
    reply: Reply,
    status: u16,
    code: &'static str,
}

#[track_caller]
fn check(case: &Case) {
    assert_eq!(
        (case.reply.status, case.reply.code().as_str()),
        (case.status, case.code),
        "{}: {}",
        case.what,
        String::from_utf8_lossy(&case.reply.body)
    );
    let error = &case.reply.json()["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{}: a message",
        case.what
    );
    assert!(
        error["details"].is_object(),
        "{}: details is an object",
        case.what
    );
}

struct Fixture {
    unit: String,
    policy: String,
    cluster: String,
    locked: String,
    internal_unit: String,
    score_unit: String,
    param: String,
}

/// A unit (first filter of a policy), the policy attached to a cluster.
fn fixture(admin: &Client) -> Fixture {
    let unit = expect_status(
        &admin.post_wasm(
            "/api/v1/schedulingpolicyunits?name=Mine",
            builtin_wasm("memory"),
        ),
        201,
    );
    let unit_id_text = unit["id"].as_str().expect("id").to_owned();
    let policy = expect_status(
        &admin.post("/api/v1/schedulingpolicies", &json!({ "name": "p" })),
        201,
    );
    let policy_id = policy["id"].as_str().expect("id").to_owned();
    expect_status(
        &admin.post(
            &format!("/api/v1/schedulingpolicies/{policy_id}/filters"),
            &json!({ "scheduling_policy_unit": { "id": unit_id_text }, "position": -1 }),
        ),
        201,
    );
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "c", "scheduling_policy": { "id": policy_id } }),
        ),
        201,
    );
    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies"), 200);
    let locked = policies
        .as_array()
        .expect("list")
        .iter()
        .find(|p| p["locked"] == true)
        .expect("a built-in policy")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    Fixture {
        param: unit["params"][0]["name"]
            .as_str()
            .expect("a parameter")
            .to_owned(),
        unit: unit_id_text,
        policy: policy_id,
        cluster: cluster["id"].as_str().expect("id").to_owned(),
        locked,
        internal_unit: unit_id(admin, "CPU"),
        score_unit: unit_id(admin, "OptimalForMemoryEvenDistribution"),
    }
}

#[test]
fn every_bad_input_gets_its_status_and_code_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cap = UPLOAD_CAP_MIB.to_string();
    let server = Server::start_with(dir.path(), &["--max-module-mib", &cap], &[]);
    let admin = server.admin();
    let f = fixture(&admin);
    let units = "/api/v1/schedulingpolicyunits";
    let policy = format!("/api/v1/schedulingpolicies/{}", f.policy);
    let cluster = format!("/api/v1/clusters/{}", f.cluster);
    let before = dump(&server.db);

    let json_post = |path: &str, body: &str| {
        admin.send(
            "POST",
            path,
            Some(body.as_bytes().to_vec()),
            Some("application/json"),
            &[],
        )
    };
    let cases = vec![
        // Uploads.
        Case {
            what: "garbage bytes",
            reply: admin.post_wasm(units, b"definitely not WebAssembly"),
            status: 422,
            code: "module_not_wasm",
        },
        Case {
            what: "a core module",
            reply: admin.post_wasm(units, &wat::parse_str("(module)").expect("wat")),
            status: 422,
            code: "module_is_core_module",
        },
        Case {
            what: "a component with the wrong exports (none of ours)",
            reply: admin.post_wasm(
                units,
                &component(r#"(component (core module (func (export "f"))))"#),
            ),
            status: 422,
            code: "module_exports",
        },
        Case {
            what: "a component with a forbidden import",
            reply: admin.post_wasm(
                units,
                &component(r#"(component (import "wasi:sockets/tcp@0.2.0" (instance)))"#),
            ),
            status: 422,
            code: "module_forbidden_import",
        },
        Case {
            what: "an oversized body",
            reply: admin.post_wasm(units, &vec![0u8; UPLOAD_CAP_MIB * 1024 * 1024 + 1]),
            status: 413,
            code: "payload_too_large",
        },
        Case {
            what: "replacing a built-in unit's module",
            reply: admin.put_wasm(&format!("{units}/{}/module", f.internal_unit), builtin_wasm("memory")),
            status: 409,
            code: "unit_internal",
        },
        Case {
            what: "a unit name already taken by other bytes",
            reply: admin.post_wasm(&format!("{units}?name=Mine"), builtin_wasm("cpu")),
            status: 409,
            code: "name_taken",
        },
        // Malformed requests.
        Case {
            what: "malformed JSON",
            reply: json_post("/api/v1/schedulingpolicies", r#"{"name": "x""#),
            status: 400,
            code: "malformed_json",
        },
        Case {
            what: "an unknown field",
            reply: admin.post("/api/v1/schedulingpolicies", &json!({ "name": "x", "colour": "red" })),
            status: 400,
            code: "invalid_field",
        },
        Case {
            what: "a missing field",
            reply: admin.post("/api/v1/clusters", &json!({ "description": "no name" })),
            status: 400,
            code: "invalid_field",
        },
        Case {
            what: "not JSON",
            reply: admin.send("POST", "/api/v1/clusters", Some(b"name=x".to_vec()), Some("text/plain"), &[]),
            status: 415,
            code: "unsupported_media_type",
        },
        Case {
            what: "an id that is not a UUID",
            reply: admin.get("/api/v1/clusters/not-a-uuid"),
            status: 400,
            code: "invalid_path",
        },
        Case {
            what: "a blank name",
            reply: admin.post("/api/v1/clusters", &json!({ "name": "  " })),
            status: 400,
            code: "invalid_value",
        },
        Case {
            what: "a negative factor",
            reply: admin.post(
                &format!("{policy}/weights"),
                &json!({ "scheduling_policy_unit": { "id": f.score_unit }, "factor": -1 }),
            ),
            status: 400,
            code: "invalid_value",
        },
        Case {
            what: "a position other than -1/0/1",
            reply: admin.post(
                &format!("{policy}/filters"),
                &json!({ "scheduling_policy_unit": { "id": f.internal_unit }, "position": 5 }),
            ),
            status: 400,
            code: "invalid_value",
        },
        // Parameters.
        Case {
            what: "an invalid parameter value",
            reply: admin.put(&policy, &json!({ "properties": [ { "name": f.param, "value": "lots" } ] })),
            status: 422,
            code: "invalid_parameter_value",
        },
        Case {
            what: "an unknown parameter on a policy",
            reply: admin.put(&policy, &json!({ "properties": [ { "name": "NoSuchKey", "value": "1" } ] })),
            status: 422,
            code: "unknown_parameter",
        },
        Case {
            what: "an unknown parameter on a cluster",
            reply: admin.put(&cluster, &json!({ "properties": [ { "name": "NoSuchKey", "value": "1" } ] })),
            status: 422,
            code: "unknown_parameter",
        },
        // Policy rules.
        Case {
            what: "editing a locked policy",
            reply: admin.put(
                &format!("/api/v1/schedulingpolicies/{}", f.locked),
                &json!({ "description": "mine now" }),
            ),
            status: 409,
            code: "policy_locked",
        },
        Case {
            what: "adding a filter to a locked policy",
            reply: admin.post(
                &format!("/api/v1/schedulingpolicies/{}/filters", f.locked),
                &json!({ "scheduling_policy_unit": { "id": f.unit } }),
            ),
            status: 409,
            code: "policy_locked",
        },
        Case {
            what: "deleting a locked policy",
            reply: admin.delete(&format!("/api/v1/schedulingpolicies/{}", f.locked)),
            status: 409,
            code: "policy_locked",
        },
        Case {
            what: "a unit twice in a policy",
            reply: admin.post(&format!("{policy}/filters"), &json!({ "scheduling_policy_unit": { "id": f.unit } })),
            status: 409,
            code: "unit_already_in_policy",
        },
        Case {
            what: "a second first filter",
            reply: admin.post(
                &format!("{policy}/filters"),
                &json!({ "scheduling_policy_unit": { "id": f.internal_unit }, "position": -1 }),
            ),
            status: 409,
            code: "first_filter_taken",
        },
        Case {
            what: "a score-only unit as a filter",
            reply: admin.post(&format!("{policy}/filters"), &json!({ "scheduling_policy_unit": { "id": f.score_unit } })),
            status: 422,
            code: "unit_type_mismatch",
        },
        Case {
            what: "a unit that does not exist",
            reply: admin.post(
                &format!("{policy}/filters"),
                &json!({ "scheduling_policy_unit": { "id": "00000000-0000-4000-8000-000000000000" } }),
            ),
            status: 404,
            code: "not_found",
        },
        // Deletes that would break something.
        Case {
            what: "deleting a unit in use",
            reply: admin.delete(&format!("{units}/{}", f.unit)),
            status: 409,
            code: "unit_in_use",
        },
        Case {
            what: "deleting a built-in unit",
            reply: admin.delete(&format!("{units}/{}", f.internal_unit)),
            status: 409,
            code: "unit_internal",
        },
        Case {
            what: "deleting a policy a cluster runs",
            reply: admin.delete(&policy),
            status: 409,
            code: "policy_in_use",
        },
        Case {
            what: "removing a filter the policy does not have",
            reply: admin.delete(&format!("{policy}/filters/{}", f.internal_unit)),
            status: 404,
            code: "not_found",
        },
        Case {
            what: "a cluster name already taken",
            reply: admin.post("/api/v1/clusters", &json!({ "name": "c" })),
            status: 409,
            code: "name_taken",
        },
        Case {
            what: "revoking the last admin token",
            reply: {
                let tokens = expect_status(&admin.get("/api/v1/tokens"), 200);
                let id = tokens[0]["id"].as_str().expect("id").to_owned();
                admin.delete(&format!("/api/v1/tokens/{id}"))
            },
            status: 409,
            code: "last_admin_token",
        },
        // Decisions.
        Case {
            what: "an unknown field in a host",
            reply: admin.post(
                &format!("{cluster}/schedule"),
                &json!({ "vm": { "id": "v" }, "hosts": [ { "id": "h", "colour": "red" } ] }),
            ),
            status: 400,
            code: "invalid_field",
        },
        Case {
            what: "a candidate that is not a host",
            reply: admin.post(
                &format!("{cluster}/schedule"),
                &json!({ "vm": { "id": "v" }, "hosts": tour_hosts(), "candidates": ["nowhere"] }),
            ),
            status: 422,
            code: "invalid_snapshot",
        },
        Case {
            what: "balancing with a policy that has no balance unit",
            reply: admin.post(&format!("{cluster}/balance"), &json!({ "hosts": tour_hosts() })),
            status: 422,
            code: "no_balance_unit",
        },
        Case {
            what: "a cluster that does not exist",
            reply: admin.post(
                "/api/v1/clusters/00000000-0000-4000-8000-000000000000/schedule",
                &json!({ "vm": { "id": "v" } }),
            ),
            status: 404,
            code: "not_found",
        },
        // Routing.
        Case {
            what: "an unknown route",
            reply: admin.get("/api/v1/nothing-here"),
            status: 404,
            code: "no_route",
        },
        Case {
            what: "a method the route does not have",
            reply: admin.send("PATCH", "/api/v1/clusters", None, None, &[]),
            status: 405,
            code: "method_not_allowed",
        },
    ];
    for case in &cases {
        check(case);
    }

    // Details name what is wrong.
    let unknown_field = &cases
        .iter()
        .find(|c| c.what == "an unknown field")
        .expect("case")
        .reply;
    assert_eq!(unknown_field.json()["error"]["details"]["field"], "colour");
    let host_field = &cases
        .iter()
        .find(|c| c.what == "an unknown field in a host")
        .expect("case")
        .reply;
    assert_eq!(
        host_field.json()["error"]["details"]["field"],
        "hosts[0].colour"
    );
    let core = &cases
        .iter()
        .find(|c| c.what == "a core module")
        .expect("case")
        .reply;
    let message = core.json()["error"]["message"]
        .as_str()
        .expect("message")
        .to_owned();
    assert!(
        message.contains("component"),
        "says how to make a component: {message}"
    );
    let too_large = &cases
        .iter()
        .find(|c| c.what == "an oversized body")
        .expect("case")
        .reply;
    assert_eq!(
        too_large.json()["error"]["details"]["limit_bytes"],
        UPLOAD_CAP_MIB * 1024 * 1024
    );
    let candidate = &cases
        .iter()
        .find(|c| c.what == "a candidate that is not a host")
        .expect("case")
        .reply;
    assert_eq!(
        candidate.json()["error"]["details"]["field"],
        "candidates[0]"
    );

    assert_eq!(dump(&server.db), before, "no bad input changed the store");
}

#[test]
fn a_change_that_would_strand_a_parameter_value_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let f = fixture(&admin);
    let policy = format!("/api/v1/schedulingpolicies/{}", f.policy);
    let cluster = format!("/api/v1/clusters/{}", f.cluster);
    // The cluster overrides the filter's parameter.
    expect_status(
        &admin.put(
            &cluster,
            &json!({ "properties": [ { "name": f.param, "value": "120" } ] }),
        ),
        200,
    );
    let before = dump(&server.db);

    // Removing the only unit that declares it would leave the override
    // unusable.
    let reply = admin.delete(&format!("{policy}/filters/{}", f.unit));
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "params_would_break")
    );
    // So would moving the cluster to a policy whose units do not declare it.
    let other = expect_status(
        &admin.post("/api/v1/schedulingpolicies", &json!({ "name": "empty" })),
        201,
    );
    let after_add = dump(&server.db);
    let reply = admin.put(
        &cluster,
        &json!({ "scheduling_policy": { "id": other["id"] } }),
    );
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "params_would_break")
    );
    assert_eq!(dump(&server.db), after_add);
    // Replacing the unit's module with one that does not declare it, too.
    let reply = admin.put_wasm(
        &format!("/api/v1/schedulingpolicyunits/{}/module", f.unit),
        builtin_wasm("cpu"),
    );
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "params_would_break"),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(dump(&server.db), after_add);
    assert_ne!(before, after_add);
}
