//! Policies in any language, end to end: the HeadroomAffinity example in
//! Rust, Python, JavaScript and C, built from source, is uploaded to a real
//! server over HTTP, attached to a policy (as a filter and as a weight) and
//! a cluster, and schedules the same VM over the same hosts. Every language
//! must choose, rank and explain identically, and compiling an 18 MB upload
//! must not stop the server from answering. (`tests/tests/all/languages.rs`
//! checks the same units through the sandbox directly, corner cases and
//! limits included.)

#[path = "../tests/all/languages/examples.rs"]
mod examples;

use serde_json::{Value, json};

use crate::support::{Client, Server, expect_status};
use examples::Language;

/// Hosts in the request: enough for every branch of the unit, few enough
/// that each call is quick under the server's default limits.
const HOSTS: usize = 120;

/// Racks hosts are in; `r-ü` checks that non-ASCII text crosses intact.
const RACKS: [&str; 4] = ["r1", "r2", "r3", "r-ü"];

/// `HOSTS` hosts with free memory spread over 0-16 GiB (some just around
/// the VM's size plus headroom) and racks; every tenth host has none.
fn hosts() -> Value {
    let hosts: Vec<Value> = (0..HOSTS)
        .map(|i| {
            let free = (i * 2711 % 64) as f64 * 256.0 + if i % 7 == 0 { 0.5 } else { 0.0 };
            let capabilities = if i % 10 == 3 {
                json!({ "disk": "hdd" })
            } else {
                json!({ "rack": RACKS[i * 7 % RACKS.len()], "disk": "ssd" })
            };
            json!({
                "id": format!("h{i:03}"),
                "metrics": { "memory_total_mib": 16384, "memory_free_mib": free },
                "capabilities": capabilities,
            })
        })
        .collect();
    Value::Array(hosts)
}

/// The unit's name in `language`, as its `info()` gives it.
fn unit_name(language: Language) -> String {
    let suffix = match language {
        Language::Rust => "Rust",
        Language::Python => "Python",
        Language::Js => "Js",
        Language::C => "C",
    };
    format!("HeadroomAffinity{suffix}")
}

/// `value` without what names the unit, policy and cluster, measures the
/// call or counts answers reused from an earlier decision (which differ by
/// language and by run), leaving what the policy decided and why.
fn decision(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "unit"
                            | "unit_id"
                            | "usage"
                            | "reused"
                            | "decision_id"
                            | "policy_id"
                            | "cluster_id"
                    )
                })
                .map(|(k, v)| (k.clone(), decision(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(decision).collect()),
        other => other.clone(),
    }
}

/// Uploads `language`'s example, already built as `wasm`; the unit's id.
fn upload(admin: &Client, language: Language, wasm: &[u8]) -> String {
    let name = unit_name(language);
    let unit = expect_status(
        &admin.post_wasm(&format!("/api/v1/schedulingpolicyunits?name={name}"), wasm),
        201,
    );
    assert_eq!(
        unit["exports"],
        json!({ "filter": true, "score": true, "balance": false }),
        "{name}"
    );
    // Read by the compile child from the component's producers sections.
    let told = match language {
        Language::Js => "javascript",
        other => other.name(),
    };
    assert_eq!(unit["module"]["language"], told, "{name}");
    unit["id"].as_str().expect("id").to_owned()
}

/// A policy with the unit as its filter and its weight (factor 2, with
/// `HeadroomMib` set), attached to a cluster of its own; the cluster's
/// schedule path.
fn attach(admin: &Client, language: Language, unit_id: &str) -> String {
    let policy = expect_status(
        &admin.post(
            "/api/v1/schedulingpolicies",
            &json!({ "name": format!("headroom-{}", language.name()) }),
        ),
        201,
    );
    let policy_path = format!(
        "/api/v1/schedulingpolicies/{}",
        policy["id"].as_str().expect("id")
    );
    expect_status(
        &admin.post(
            &format!("{policy_path}/filters"),
            &json!({ "scheduling_policy_unit": { "id": unit_id } }),
        ),
        201,
    );
    expect_status(
        &admin.post(
            &format!("{policy_path}/weights"),
            &json!({ "scheduling_policy_unit": { "id": unit_id }, "factor": 2 }),
        ),
        201,
    );
    expect_status(
        &admin.put(
            &policy_path,
            &json!({ "properties": [ { "name": "HeadroomMib", "value": "1024" } ] }),
        ),
        200,
    );
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({
                "name": format!("cluster-{}", language.name()),
                "scheduling_policy": { "id": policy["id"] },
            }),
        ),
        201,
    );
    format!(
        "/api/v1/clusters/{}/schedule",
        cluster["id"].as_str().expect("id")
    )
}

#[test]
fn every_language_uploads_schedules_and_explains_identically() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let token = expect_status(
        &admin.post(
            "/api/v1/tokens",
            &json!({ "name": "engine", "role": "engine" }),
        ),
        201,
    );
    let engine = server.client(Some(token["secret"].as_str().expect("secret")));
    let request = json!({
        "vm": { "id": "vm-1", "memory_mib": 4096, "extra_specs": { "rack": "r-ü" } },
        "hosts": hosts(),
    });

    // Built first, so that only the server's work is timed against below.
    let wasm: Vec<_> = Language::ALL.map(examples::example).into();
    let mut schedule_paths = vec![(
        Language::Rust,
        attach(
            &admin,
            Language::Rust,
            &upload(&admin, Language::Rust, &wasm[0]),
        ),
    )];
    // Uploading the 18 MB Python unit compiles it for seconds; meanwhile the
    // Rust unit's cluster keeps answering (the compile runs in a process
    // of its own, off the request path).
    let rust_schedule = format!("{}?dry_run=true", schedule_paths[0].1);
    let (python_id, answered_meanwhile) = std::thread::scope(|scope| {
        let uploading = scope.spawn(|| upload(&admin, Language::Python, &wasm[1]));
        let mut answered_meanwhile = 0;
        while !uploading.is_finished() {
            expect_status(&engine.post(&rust_schedule, &request), 200);
            if !uploading.is_finished() {
                answered_meanwhile += 1;
            }
            // Paced: a loop of back-to-back decisions would take a core
            // from the compile it runs beside.
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        (
            uploading.join().expect("the upload thread"),
            answered_meanwhile,
        )
    });
    assert!(
        answered_meanwhile > 0,
        "no decision was answered while a Python unit compiled"
    );
    schedule_paths.push((
        Language::Python,
        attach(&admin, Language::Python, &python_id),
    ));
    for (language, wasm) in [(Language::Js, &wasm[2]), (Language::C, &wasm[3])] {
        schedule_paths.push((
            language,
            attach(&admin, language, &upload(&admin, language, wasm)),
        ));
    }

    let mut decisions = Vec::new();
    for (language, path) in &schedule_paths {
        let answer = expect_status(&engine.post(path, &request), 200);
        // The explain names the unit that judged, in its own language.
        assert_eq!(
            answer["explain"]["filters"][0]["unit"],
            unit_name(*language),
            "{answer:#}"
        );
        decisions.push((*language, decision(&answer)));
    }

    // The decision is not trivial: both reasons appear, and a host in the
    // VM's rack wins.
    let (_, rust) = &decisions[0];
    let rejected = rust["explain"]["filters"][0]["rejected"]
        .as_array()
        .expect("rejections");
    let reasons: Vec<&str> = rejected
        .iter()
        .filter_map(|r| r["reason"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("needs ") && r.ends_with(" MiB free"))
            && reasons.contains(&"would leave less than 1024 MiB free"),
        "{rust:#}"
    );
    let chosen = rust["chosen_host"].as_str().expect("a host is chosen");
    let chosen_index: usize = chosen[1..].parse().expect("h<index>");
    assert_eq!(RACKS[chosen_index * 7 % RACKS.len()], "r-ü", "{rust:#}");

    for (language, other) in &decisions[1..] {
        assert_eq!(
            other,
            rust,
            "{} decided differently from Rust",
            language.name()
        );
    }
}
