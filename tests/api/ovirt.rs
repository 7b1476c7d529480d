//! oVirt's external scheduler protocol (issue #14) against golden files:
//! the requests in `golden/ovirt/*.request.xml` are XML-RPC calls as
//! oVirt's engine writes them (`ExternalSchedulerBrokerImpl` through
//! Apache XML-RPC with extensions enabled: the four methods and their
//! argument shapes, strings as bare `<value>` text, factors as `<i4>`,
//! properties as a `<struct>`), with the host and VM ids of
//! ovirt-scheduler-proxy's own test (`SchedulerProxyTest.java`), and each
//! answer is kept next to it (`SANDPIPER_UPDATE_GOLDEN=1` rewrites them).
//! The decisions are also checked one by one from the answers, read back
//! as the engine reads them (`ExternalSchedulerBrokerObjectBuilder`), so a
//! golden file accepted by mistake still fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use dxr::{FaultResponse, MethodResponse, Value};
use serde_json::json;
use tower::ServiceExt;

use crate::support::{Api, expect_status};

const H1: &str = "11111111-1111-1111-1111-111111111111";
const H2: &str = "22222222-2222-2222-2222-222222222222";
const H3: &str = "44444444-4444-4444-4444-444444444444";
const UNKNOWN_HOST: &str = "55555555-5555-5555-5555-555555555555";
const VM: &str = "33333333-3333-3333-3333-333333333333";
const UNKNOWN_VM: &str = "66666666-6666-6666-6666-666666666666";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/api/golden/ovirt")
}

fn request(name: &str) -> String {
    let path = golden_dir().join(format!("{name}.request.xml"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Compares `answer` with the golden answer `name`.
fn golden(name: &str, answer: &str) {
    let path = golden_dir().join(format!("{name}.answer.xml"));
    let answer = format!("{answer}\n");
    if std::env::var_os("SANDPIPER_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &answer).expect("write golden");
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with SANDPIPER_UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    assert!(
        expected == answer,
        "the answer to {name} changed; review it and run with SANDPIPER_UPDATE_GOLDEN=1 to \
         accept (golden: {}); got:\n{answer}",
        path.display()
    );
}

/// POSTs `body` to `path` on the XML-RPC endpoint: the status and body.
async fn post(app: &Router, path: &str, body: &str) -> (u16, String) {
    let request = Request::builder()
        .method("POST")
        .uri(path)
        .header("Content-Type", "text/xml")
        .header("Content-Length", body.len())
        .body(Body::from(body.to_owned()))
        .expect("a request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (status, String::from_utf8(bytes.to_vec()).expect("UTF-8"))
}

/// A successful answer's value.
fn value(answer: &str) -> Value {
    MethodResponse::from_xml(answer)
        .unwrap_or_else(|e| panic!("not a methodResponse ({e}): {answer}"))
        .value
}

fn members(v: &Value) -> &BTreeMap<String, Value> {
    match v {
        Value::Struct(m) => m,
        _ => panic!("not a struct: {v:?}"),
    }
}

fn list(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) => items,
        _ => panic!("not an array: {v:?}"),
    }
}

fn text(v: &Value) -> &str {
    match v {
        Value::String(s) => s,
        _ => panic!("not a string: {v:?}"),
    }
}

fn texts(v: &Value) -> Vec<&str> {
    list(v).iter().map(text).collect()
}

/// A cluster whose held inventory is H1 (big, four VMs, among them VM),
/// H2 (almost full) and H3 (roomy, empty), as an oVirt operator pushes it.
/// Returns the cluster's id.
async fn cluster_with_inventory(api: &Api) -> String {
    let admin = api.admin();
    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies").await, 200);
    let policy = policies.as_array().expect("policies")[0]["id"].clone();
    let created = expect_status(
        &admin
            .post(
                "/api/v1/clusters",
                &json!({ "name": "ovirt", "scheduling_policy": { "id": policy } }),
            )
            .await,
        201,
    );
    let id = created["id"].as_str().expect("id");
    // What the engine's host statistics say: its VMs and the memory
    // committed to them (VDS `vm_count`, `mem_commited`) are reported, not
    // derived from the VMs pushed.
    let host = |id: &str, total: f64, free: f64, vms: u32, committed: f64| {
        json!({ "id": id, "status": "up",
                "metrics": { "memory_total_mib": total, "memory_free_mib": free,
                             "memory_committed_mib": committed, "vm_count": vms,
                             "cpu_sockets": 2, "cpu_cores": 16, "cpu_threads": 32,
                             "cpu_usage_percent": 10 } })
    };
    let vm = |id: &str, memory: f64| {
        json!({ "id": id, "host": H1, "memory_mib": memory, "vcpus": 2,
                "cpu_usage_percent": 5 })
    };
    expect_status(
        &admin
            .put(
                &format!("/api/v1/clusters/{id}/inventory"),
                &json!({
                    "generation": 1,
                    "hosts": [host(H1, 65536.0, 40000.0, 4, 10240.0),
                              host(H2, 8192.0, 1024.0, 0, 7168.0),
                              host(H3, 65536.0, 60000.0, 0, 0.0)],
                    "vms": [vm(VM, 4096.0),
                            vm("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", 2048.0),
                            vm("bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb", 2048.0),
                            vm("cccccccc-cccc-cccc-cccc-cccccccccccc", 2048.0)],
                }),
            )
            .await,
        200,
    );
    id.to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_engines_four_calls_are_answered_by_the_policy() {
    let api = Api::start().await;
    cluster_with_inventory(&api).await;
    let app = sandpiper::api::ovirt::app(api.state.clone());

    // discover: every unit under each role it exports, as [description,
    // "key=regex;..."], the shape the engine's discovery parses.
    let (status, answer) = post(&app, "/", &request("discover")).await;
    assert_eq!(status, 200);
    golden("discover", &answer);
    let found = value(&answer);
    let found = members(&found);
    let filters = members(&found["filters"]);
    let memory = list(&filters["Memory"]);
    assert_eq!(memory.len(), 2, "[description, properties]");
    assert!(!text(&memory[0]).is_empty(), "a description");
    let overloaded = text(&list(&filters["CPUOverloaded"])[1]);
    assert!(
        overloaded.contains("HighUtilization=") && overloaded.contains(';'),
        "{overloaded}"
    );
    assert!(members(&found["scores"]).contains_key("OptimalForEvenGuestDistribution"));
    assert!(members(&found["balance"]).contains_key("OptimalForEvenGuestDistribution"));
    assert!(!members(&found["balance"]).contains_key("Memory"));

    // runFilters: H2 has 1,024 MiB free, VM needs 4,096.
    let (status, answer) = post(&app, "/", &request("run_filters")).await;
    assert_eq!(status, 200);
    golden("run_filters", &answer);
    let reply = value(&answer);
    let reply = members(&reply);
    assert_eq!(reply["result_code"], Value::Integer(0), "{answer}");
    assert_eq!(texts(&reply["result"]), [H1, H3]);

    // runCostFunctions: H3 runs no VM and has the most memory free: the
    // lowest cost; H1 next.
    let (status, answer) = post(&app, "/RPC2", &request("run_cost_functions")).await;
    assert_eq!(status, 200);
    golden("run_cost_functions", &answer);
    let reply = value(&answer);
    let reply = members(&reply);
    assert_eq!(reply["result_code"], Value::Integer(0), "{answer}");
    let costs: BTreeMap<&str, &Value> = list(&reply["result"])
        .iter()
        .map(|pair| (text(&list(pair)[0]), &list(pair)[1]))
        .collect();
    assert_eq!(costs[H3], &Value::Integer(0), "{answer}");
    assert_eq!(costs[H1], &Value::Integer(1), "{answer}");

    // runLoadBalancing: H1 runs four VMs, H3 none: a VM of H1 should go,
    // to H3 (H2 has no room for any of them).
    let (status, answer) = post(&app, "/", &request("run_load_balancing")).await;
    assert_eq!(status, 200);
    golden("run_load_balancing", &answer);
    let reply = value(&answer);
    let reply = members(&reply);
    assert_eq!(reply["result_code"], Value::Integer(0), "{answer}");
    let result = list(&reply["result"]);
    assert_eq!(result.len(), 2, "[vmID, [hosts]]");
    assert!(text(&result[0]).len() == 36, "a VM of H1: {answer}");
    assert!(texts(&result[1]).contains(&H3), "{answer}");
    assert!(!texts(&result[1]).contains(&H1), "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_ids_and_bad_properties_are_errors_naming_them() {
    let api = Api::start().await;
    let cluster = cluster_with_inventory(&api).await;
    let app = sandpiper::api::ovirt::app(api.state.clone());

    let (status, answer) = post(&app, "/", &request("unknown_ids")).await;
    assert_eq!(status, 200);
    // The cluster's id is new in every run.
    golden("unknown_ids", &answer.replace(&cluster, "{cluster}"));
    let reply = value(&answer);
    let reply = members(&reply);
    assert_eq!(reply["result_code"], Value::Integer(1));
    assert!(members(&reply["plugin_errors"]).contains_key("NoSuchUnit"));
    let errors = texts(&reply["errors"]).join("\n");
    assert!(errors.contains(UNKNOWN_HOST), "{errors}");
    assert!(errors.contains(UNKNOWN_VM), "{errors}");
    // Decided over what is held: H1 has room for a VM of no known size.
    assert_eq!(texts(&reply["result"]), [H1]);

    let (status, answer) = post(&app, "/", &request("bad_property")).await;
    assert_eq!(status, 200);
    golden("bad_property", &answer);
    let reply = value(&answer);
    let reply = members(&reply);
    assert_eq!(reply["result_code"], Value::Integer(1));
    let errors = texts(&reply["errors"]).join("\n");
    assert!(errors.contains("HighUtilization"), "{errors}");
    // Nothing decided: every host sent, as the proxy answers.
    assert_eq!(texts(&reply["result"]), [H1, H3]);

    // Hosts no cluster holds: nothing to decide with.
    let call = request("run_filters")
        .replace(H1, UNKNOWN_HOST)
        .replace(H2, UNKNOWN_HOST)
        .replace(H3, UNKNOWN_HOST);
    let (_, answer) = post(&app, "/", &call).await;
    let reply = value(&answer);
    let reply = members(&reply);
    assert_eq!(reply["result_code"], Value::Integer(1));
    assert!(text(&list(&reply["errors"])[0]).contains("held inventory"));
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_calls_are_faults_with_a_message() {
    let api = Api::start().await;
    let app = sandpiper::api::ovirt::app(api.state.clone());
    let fault = |answer: &str| {
        let f = FaultResponse::from_xml(answer)
            .unwrap_or_else(|e| panic!("not a fault ({e}): {answer}"))
            .fault;
        (f.code(), f.string().to_owned())
    };
    let cases: [(&str, i32, &str); 5] = [
        (
            "<methodCall><methodName>discover</methodName></methodCal>",
            -32700,
            "well-formed",
        ),
        ("<hello/>", -32600, "not an XML-RPC call"),
        (
            "<methodCall><methodName>runFilter</methodName><params/></methodCall>",
            -32601,
            "runFilter",
        ),
        (
            "<methodCall><methodName>runFilters</methodName><params><param><value>x</value></param></params></methodCall>",
            -32602,
            "takes 4 parameters",
        ),
        (
            "<methodCall><methodName>runCostFunctions</methodName><params><param><value><array><data><value>x</value></data></array></value></param><param><value><array><data/></array></value></param><param><value>vm</value></param><param><value><struct/></value></param></params></methodCall>",
            -32602,
            "[name, factor]",
        ),
    ];
    for (body, code, words) in cases {
        let (status, answer) = post(&app, "/", body).await;
        assert_eq!(status, 200, "{body}");
        let (got, message) = fault(&answer);
        assert_eq!(got, code, "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
    }
    // Deeply nested: refused before it is parsed.
    let deep = format!(
        "<methodCall><methodName>discover</methodName><params><param>{}",
        "<value><array><data>".repeat(10_000)
    );
    let (_, answer) = post(&app, "/", &deep).await;
    assert_eq!(fault(&answer).0, -32600);
    // Over the body limit: a fault too, never a dropped connection.
    let huge = "x".repeat(sandpiper::api::ovirt::MAX_CALL_BYTES + 1);
    let (status, answer) = post(&app, "/", &huge).await;
    assert_eq!(status, 200);
    assert_eq!(fault(&answer).0, -32600, "{answer}");
    // Anything but POST / or /RPC2.
    let (status, answer) = post(&app, "/api/v1/clusters", "<x/>").await;
    assert_eq!(status, 200);
    assert!(fault(&answer).1.contains("/RPC2"));
}
