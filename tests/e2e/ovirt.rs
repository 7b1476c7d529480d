//! oVirt's external scheduler protocol over the real binary (issue #14):
//! `--ovirt-listen` serves XML-RPC without a token, and an XML-RPC client,
//! as oVirt's engine is one, calls all four methods after the cluster's
//! inventory was pushed over the JSON API, then sends an unknown id, an
//! unknown method and a body that is not XML. The client is Python 3's
//! standard `xmlrpc.client` (the library ovirt-scheduler-proxy itself
//! served with), so the calls are encoded by an implementation that is not
//! ours.

use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Server, expect_status};

const H1: &str = "11111111-1111-1111-1111-111111111111";
const H2: &str = "22222222-2222-2222-2222-222222222222";
const H3: &str = "44444444-4444-4444-4444-444444444444";
const UNKNOWN_HOST: &str = "55555555-5555-5555-5555-555555555555";
const VM: &str = "33333333-3333-3333-3333-333333333333";
const UNKNOWN_VM: &str = "66666666-6666-6666-6666-666666666666";

/// The engine's side: every call it makes, then the bad ones, printed as
/// one JSON object.
const CLIENT: &str = r#"
import http.client, json, sys, xmlrpc.client
url, h1, h2, h3, unknown_host, vm, unknown_vm = sys.argv[1:8]
engine = xmlrpc.client.ServerProxy(url)
out = {}
out["discover"] = engine.discover()
out["filters"] = engine.runFilters(["Memory", "CPU"], [h1, h2, h3], vm, {})
out["costs"] = engine.runCostFunctions(
    [["OptimalForEvenGuestDistribution", 1], ["OptimalForMemoryEvenDistribution", 2]],
    [h1, h3], vm, {"HighUtilization": "80"})
out["balance"] = engine.runLoadBalancing(
    "OptimalForEvenGuestDistribution", [h1, h2, h3],
    {"HighVmCount": "3", "MigrationThreshold": "2"})
out["unknown"] = engine.runFilters(["Memory"], [h1, unknown_host], unknown_vm, {})
try:
    engine.runFilter(["Memory"], [h1], vm, {})
    out["fault"] = None
except xmlrpc.client.Fault as f:
    out["fault"] = [f.faultCode, f.faultString]
address = url.split("/")[2]
conn = http.client.HTTPConnection(address, timeout=30)
conn.request("POST", "/", body="<methodCall><methodName>discover</methodName></wrong>", headers={"Content-Type": "text/xml"})
reply = conn.getresponse()
out["malformed"] = [reply.status, reply.read().decode()]
print(json.dumps(out))
"#;

#[test]
fn an_xml_rpc_client_calls_the_four_methods_as_the_engine_does() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let ovirt_addr = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(dir.path(), &["--ovirt-listen", &ovirt_addr], &[]);
    let admin = server.admin();
    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies"), 200);
    let policy = policies.as_array().expect("policies")[0]["id"].clone();
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "ovirt", "scheduling_policy": { "id": policy } }),
        ),
        201,
    );
    // The engine's host statistics: VM count and committed memory are
    // reported with the host, as for every engine.
    let host = |id: &str, total: f64, free: f64, vms: u32, committed: f64| {
        json!({ "id": id, "status": "up",
                "metrics": { "memory_total_mib": total, "memory_free_mib": free,
                             "memory_committed_mib": committed, "vm_count": vms,
                             "cpu_sockets": 2, "cpu_cores": 16, "cpu_threads": 32 } })
    };
    let vm =
        |id: &str, memory: f64| json!({ "id": id, "host": H1, "memory_mib": memory, "vcpus": 2 });
    expect_status(
        &admin.put(
            &format!(
                "/api/v1/clusters/{}/inventory",
                cluster["id"].as_str().expect("id")
            ),
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
        ),
        200,
    );

    let output = Command::new("python3")
        .arg("-c")
        .arg(CLIENT)
        .arg(format!("http://{ovirt_addr}/"))
        .args([H1, H2, H3, UNKNOWN_HOST, VM, UNKNOWN_VM])
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "the client failed: {}\nserver log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.log()
    );
    let out: Value = serde_json::from_slice(&output.stdout).expect("the client's JSON");

    // discover: the units, in the engine's shape.
    assert!(out["discover"]["filters"]["Memory"].is_array(), "{out}");
    assert!(out["discover"]["scores"]["OptimalForMemoryEvenDistribution"].is_array());
    assert!(out["discover"]["balance"]["OptimalForEvenGuestDistribution"].is_array());

    // runFilters: H2 cannot take the VM's 4,096 MiB.
    assert_eq!(out["filters"]["result_code"], 0, "{out}");
    assert_eq!(out["filters"]["result"], json!([H1, H3]));

    // runCostFunctions: H3 (no VMs, more memory free) costs least.
    assert_eq!(out["costs"]["result_code"], 0, "{out}");
    assert_eq!(out["costs"]["result"], json!([[H1, 1], [H3, 0]]));

    // runLoadBalancing: a VM of H1 to H3.
    assert_eq!(out["balance"]["result_code"], 0, "{out}");
    let vms_of_h1 = [
        VM,
        "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
        "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb",
        "cccccccc-cccc-cccc-cccc-cccccccccccc",
    ];
    let moved = out["balance"]["result"][0].as_str().expect("a VM id");
    assert!(vms_of_h1.contains(&moved), "{out}");
    assert!(
        out["balance"]["result"][1]
            .as_array()
            .expect("hosts")
            .contains(&json!(H3)),
        "{out}"
    );

    // An unknown host and VM: named in `errors`; decided over what is held.
    assert_eq!(out["unknown"]["result_code"], 1, "{out}");
    let errors = out["unknown"]["errors"].to_string();
    assert!(
        errors.contains(UNKNOWN_HOST) && errors.contains(UNKNOWN_VM),
        "{errors}"
    );
    assert_eq!(out["unknown"]["result"], json!([H1]));

    // An unknown method: an XML-RPC fault the client raises.
    assert_eq!(out["fault"][0], -32601, "{out}");
    assert!(
        out["fault"][1]
            .as_str()
            .expect("message")
            .contains("runFilter")
    );

    // Not XML: a fault in a 200, as XML-RPC answers.
    assert_eq!(out["malformed"][0], 200, "{out}");
    let body = out["malformed"][1].as_str().expect("body");
    assert!(
        body.contains("<fault>") && body.contains("-32700"),
        "{body}"
    );

    // The JSON API is not served there, even with a token: a fault.
    let engine_there = crate::support::Client {
        addr: ovirt_addr.parse().expect("an address"),
        token: admin.token.clone(),
    };
    let reply = engine_there.get("/api/v1/clusters");
    assert!(
        String::from_utf8_lossy(&reply.body).contains("<fault>"),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert!(server.stop().success(), "both listeners stop cleanly");
}
