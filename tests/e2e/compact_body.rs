//! A compact body (docs/compact-body.md) written by a stock HTTP client:
//! curl's `-F`, files on disk, sent to the real server. The in-process
//! tests (`tests/api/compact_body.rs`) write their bodies themselves; this
//! one checks that the body the docs tell engines to send is read.

use std::process::Command;

use serde_json::{Value, json};

use sandpiper::arrow_snapshot::write;
use sandpiper::snapshot::Snapshot;

use crate::support::{ADMIN_TOKEN, Server, expect_status, overloaded_hosts, overloaded_vms};

/// The answer without what differs between two decisions: times, ids, and
/// what the units cost or reused.
fn decided(answer: &Value) -> Value {
    json!({ "chosen_host": answer["chosen_host"], "ranked": answer["ranked"] })
}

#[test]
fn a_compact_body_from_curl_is_decided_as_the_same_hosts_in_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let created = expect_status(
        &admin.post("/api/v1/clusters", &json!({ "name": "curl" })),
        201,
    );
    let path = format!(
        "/api/v1/clusters/{}/schedule",
        created["id"].as_str().expect("id")
    );
    let request = json!({ "vm": { "id": "new", "memory_mib": 4096, "vcpus": 2 } });

    let mut inline = request.clone();
    inline["hosts"] = overloaded_hosts();
    inline["vms"] = overloaded_vms();
    let from_json = expect_status(&admin.post(&path, &inline), 200);

    let snapshot: Snapshot =
        serde_json::from_value(json!({ "hosts": overloaded_hosts(), "vms": overloaded_vms() }))
            .expect("a snapshot");
    let streams = write(&snapshot).expect("written");
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("written");
        path.display().to_string()
    };
    let request_file = file("request.json", request.to_string().as_bytes());
    let hosts_file = file("hosts.arrows", &streams.hosts);
    let vms_file = file("vms.arrows", &streams.vms);
    // The request as a field read from a file, the streams as file uploads
    // (`application/octet-stream`, with a file name), as the docs say.
    let output = Command::new("curl")
        .args(["--silent", "--show-error", "--fail-with-body"])
        .arg("--header")
        .arg(format!("Authorization: Bearer {ADMIN_TOKEN}"))
        .arg("--form")
        .arg(format!("request=<{request_file};type=application/json"))
        .arg("--form")
        .arg(format!("hosts=@{hosts_file}"))
        .arg("--form")
        .arg(format!(
            "vms=@{vms_file};type=application/vnd.apache.arrow.stream"
        ))
        .arg(format!("http://{}{path}", server.addr))
        .output()
        .expect("curl runs");
    assert!(
        output.status.success(),
        "curl failed: {}{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    let from_curl: Value = serde_json::from_slice(&output.stdout).expect("a JSON answer");
    assert_eq!(from_json["chosen_host"], "cool", "{from_json}");
    assert_eq!(decided(&from_curl), decided(&from_json));
}
