//! The compact body of a schedule or balancing request
//! (`multipart/form-data`: the request as JSON, the hosts and VMs as
//! Arrow IPC streams; docs/compact-body.md) decides and answers exactly as
//! the same hosts sent as JSON, and a bad part, column or value is refused
//! with the field named, as a bad JSON body is.

use serde_json::{Value, json};

use sandpiper::arrow_snapshot::{CompactBody, Streams, write};
use sandpiper::snapshot::Snapshot;

use crate::support::{Api, Client, expect_status, overloaded_hosts, overloaded_vms, policy_id};

/// A cluster on the default policy; its path.
async fn cluster(admin: &Client) -> String {
    let created = expect_status(
        &admin
            .post("/api/v1/clusters", &json!({ "name": "compact" }))
            .await,
        201,
    );
    format!("/api/v1/clusters/{}", created["id"].as_str().expect("id"))
}

fn snapshot() -> Snapshot {
    serde_json::from_value(json!({ "hosts": overloaded_hosts(), "vms": overloaded_vms() }))
        .expect("a snapshot")
}

fn request() -> Value {
    json!({ "vm": { "id": "new", "memory_mib": 4096, "vcpus": 2 }, "candidates": ["cool", "warm", "hot"] })
}

async fn post(admin: &Client, path: &str, body: &CompactBody) -> crate::support::Reply {
    admin
        .send(
            "POST",
            path,
            Some(body.body.clone()),
            Some(&body.content_type),
            &[],
        )
        .await
}

/// The answer without what differs between two decisions of the same
/// request: times, the decision's id, and what a unit's answers cost or
/// whether they were reused from the decision before.
fn masked(mut answer: Value) -> Value {
    fn mask(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("reused");
                for (key, value) in map.iter_mut() {
                    if matches!(
                        key.as_str(),
                        "elapsed_us" | "fuel" | "decision_id" | "decided_at"
                    ) {
                        *value = Value::Null;
                    } else {
                        mask(value);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(mask),
            _ => {}
        }
    }
    mask(&mut answer);
    answer
}

/// A multipart body of `parts` (name, content type, bytes).
fn multipart(parts: &[(&str, &str, &[u8])]) -> CompactBody {
    let mut body = Vec::new();
    for (name, media, bytes) in parts {
        body.extend(
            format!(
                "--b0undary\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\
                 Content-Type: {media}\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend(*bytes);
        body.extend(b"\r\n");
    }
    body.extend(b"--b0undary--\r\n");
    CompactBody {
        content_type: "multipart/form-data; boundary=b0undary".to_owned(),
        body,
    }
}

/// A bad compact body: its parts (name, content type, bytes), then the
/// status, error code and field (if not empty) it is refused with.
type Refusal<'a> = (Vec<(&'a str, &'a str, &'a [u8])>, u16, &'a str, &'a str);

/// An Arrow IPC stream's content type.
const ARROW: &str = "application/vnd.apache.arrow.stream";

/// The bad bodies both routes refuse alike, for a route whose valid
/// `request` part is `request` and for which `with_hosts` is that part
/// with `hosts` in it: parts missing, unknown, of the wrong type or not
/// Arrow, and a column of the wrong table.
fn part_refusals<'a>(
    request: &'a str,
    with_hosts: &'a str,
    streams: &'a Streams,
) -> Vec<Refusal<'a>> {
    let binary = "application/octet-stream";
    vec![
        (
            vec![("hosts", ARROW, streams.hosts.as_slice())],
            400,
            "invalid_field",
            "request",
        ),
        (
            vec![("request", "application/json", request.as_bytes())],
            400,
            "invalid_field",
            "hosts",
        ),
        (
            vec![
                ("request", "application/json", request.as_bytes()),
                ("hosts", ARROW, b"not arrow".as_slice()),
            ],
            422,
            "invalid_snapshot",
            "hosts",
        ),
        (
            vec![
                ("request", "application/json", request.as_bytes()),
                ("hosts", ARROW, streams.vms.as_slice()),
            ],
            422,
            "invalid_snapshot",
            "hosts.host",
        ),
        (
            vec![
                ("request", "application/json", request.as_bytes()),
                ("hosts", "application/json", streams.hosts.as_slice()),
            ],
            400,
            "invalid_field",
            "hosts",
        ),
        (
            vec![
                ("request", "application/json", request.as_bytes()),
                ("hosts", binary, streams.hosts.as_slice()),
                ("vms", binary, b"not arrow".as_slice()),
            ],
            422,
            "invalid_snapshot",
            "vms",
        ),
        (
            vec![
                ("request", "application/json", request.as_bytes()),
                ("hosts", ARROW, streams.hosts.as_slice()),
                ("extra", ARROW, streams.hosts.as_slice()),
            ],
            400,
            "invalid_field",
            "extra",
        ),
        (
            vec![
                ("request", "application/json", with_hosts.as_bytes()),
                ("hosts", ARROW, streams.hosts.as_slice()),
            ],
            400,
            "invalid_field",
            "hosts",
        ),
        (
            vec![
                ("request", "application/json", b"{".as_slice()),
                ("hosts", ARROW, streams.hosts.as_slice()),
            ],
            400,
            "malformed_json",
            "",
        ),
    ]
}

/// Posts each bad body of `cases` to `path` and checks how it is refused.
async fn assert_refused(admin: &Client, path: &str, cases: Vec<Refusal<'_>>) {
    for (parts, status, code, field) in cases {
        let reply = post(admin, path, &multipart(&parts)).await;
        let names: Vec<&str> = parts.iter().map(|p| p.0).collect();
        let body = expect_status(&reply, status);
        assert_eq!(body["error"]["code"], code, "{names:?}: {body}");
        if !field.is_empty() {
            assert_eq!(
                body["error"]["details"]["field"], field,
                "{names:?}: {body}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compact_body_is_decided_as_the_same_hosts_in_json() {
    let api = Api::start().await;
    let admin = api.admin();
    let path = format!("{}/schedule", cluster(&admin).await);

    let mut json_body = request();
    json_body["hosts"] = overloaded_hosts();
    json_body["vms"] = overloaded_vms();
    let from_json = expect_status(&admin.post(&path, &json_body).await, 200);
    let compact = write(&snapshot())
        .expect("written")
        .body(&request())
        .expect("a boundary");
    let from_columns = expect_status(&post(&admin, &path, &compact).await, 200);
    assert_eq!(from_json["chosen_host"], "cool", "{from_json}");
    assert_eq!(masked(from_columns), masked(from_json));
}

/// Each unit's `reused` count in an answer's explain record, by unit.
fn reused(answer: &Value) -> Vec<(String, u64)> {
    let explain = &answer["explain"];
    ["filters", "scores"]
        .iter()
        .flat_map(|list| explain[list].as_array().into_iter().flatten())
        .map(|record| {
            (
                record["unit"].as_str().unwrap_or_default().to_owned(),
                record["reused"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Hosts sent again unchanged are not asked about again: a per-host
/// unit's answers for them are reused, and the explain record counts
/// them; a host whose figures changed is asked again by the units that
/// read them. The decision is the one the same body gets the first time.
#[tokio::test(flavor = "multi_thread")]
async fn hosts_sent_again_unchanged_are_not_asked_about_again() {
    let api = Api::start().await;
    let admin = api.admin();
    let path = format!("{}/schedule", cluster(&admin).await);
    let body = |snapshot: &Snapshot| {
        write(snapshot)
            .expect("written")
            .body(&request())
            .expect("a boundary")
    };

    let first = expect_status(&post(&admin, &path, &body(&snapshot())).await, 200);
    assert!(
        reused(&first).iter().all(|(_, n)| *n == 0),
        "nothing to reuse yet: {:?}",
        reused(&first)
    );
    let again = expect_status(&post(&admin, &path, &body(&snapshot())).await, 200);
    assert_eq!(masked(again.clone()), masked(first.clone()));
    // `CPU` is per-host and judges all three candidates: every verdict
    // comes back.
    let cpu = |answer: &Value| {
        reused(answer)
            .into_iter()
            .find(|(unit, _)| unit == "CPU")
            .map(|(_, n)| n)
    };
    assert_eq!(cpu(&again), Some(3), "{:?}", reused(&again));

    let mut changed = snapshot();
    let warm = changed
        .hosts
        .iter_mut()
        .find(|h| h.id == "warm")
        .expect("warm");
    *warm
        .metrics
        .get_mut("memory_free_mib")
        .expect("free memory") -= 1.0;
    let after = expect_status(&post(&admin, &path, &body(&changed)).await, 200);
    // `Memory` reads free memory: it is asked again about warm alone.
    // `CPU` reads no memory column, so its verdict on warm still holds.
    let memory = after["explain"]["filters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|record| record["unit"] == "Memory")
        .expect("Memory's record");
    let asked = memory["input"].as_u64().zip(memory["reused"].as_u64());
    assert_eq!(
        asked.map(|(input, reused)| input - reused),
        Some(1),
        "warm asked again: {memory}"
    );
    assert_eq!(cpu(&after), Some(3), "{:?}", reused(&after));
    assert_eq!(after["chosen_host"], first["chosen_host"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_parts_columns_and_values_are_refused_with_the_field() {
    let api = Api::start().await;
    let admin = api.admin();
    let path = format!("{}/schedule", cluster(&admin).await);
    let streams = write(&snapshot()).expect("written");
    let request = request().to_string();

    let mut duplicate = snapshot();
    duplicate.hosts[1].id = "hot".to_owned();
    let duplicate = write(&duplicate).expect("written");
    let mut held_only = serde_json::from_str::<Value>(&request).expect("JSON");
    held_only["count"] = json!(2);
    let held_only = held_only.to_string();
    let with_hosts = json!({ "vm": {}, "hosts": [] }).to_string();

    let mut cases = part_refusals(&request, &with_hosts, &streams);
    cases.extend([
        (
            vec![
                ("request", "application/json", held_only.as_bytes()),
                ("hosts", ARROW, streams.hosts.as_slice()),
            ],
            400,
            "invalid_field",
            "count",
        ),
        (
            vec![
                ("request", "application/json", request.as_bytes()),
                ("hosts", ARROW, duplicate.hosts.as_slice()),
                ("vms", ARROW, duplicate.vms.as_slice()),
            ],
            422,
            "invalid_snapshot",
            "hosts[1].id",
        ),
    ]);
    assert_refused(&admin, &path, cases).await;

    // Neither JSON nor multipart: the 415 names both.
    let reply = admin
        .send("POST", &path, Some(b"x".to_vec()), Some("text/plain"), &[])
        .await;
    let body = expect_status(&reply, 415);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("multipart/form-data")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compact_balance_body_is_balanced_as_the_same_hosts_in_json() {
    let api = Api::start().await;
    let admin = api.admin();
    let even = policy_id(&admin, "evenly_distributed").await;
    let created = expect_status(
        &admin
            .post(
                "/api/v1/clusters",
                &json!({ "name": "compact-balance", "scheduling_policy": { "id": even } }),
            )
            .await,
        201,
    );
    let path = format!(
        "/api/v1/clusters/{}/balance",
        created["id"].as_str().expect("id")
    );

    let json_body = json!({ "hosts": overloaded_hosts(), "vms": overloaded_vms() });
    let from_json = expect_status(&admin.post(&path, &json_body).await, 200);
    // oVirt's balancer moves the least CPU-hungry VM off the overloaded host.
    assert_eq!(from_json["outcome"], "migrate", "{from_json}");
    let streams = write(&snapshot()).expect("written");
    let compact = streams.body(&json!({})).expect("a boundary");
    let from_columns = expect_status(&post(&admin, &path, &compact).await, 200);
    assert_eq!(masked(from_columns), masked(from_json));

    // Candidates in the `request` part are the JSON body's candidates.
    let only = json!({ "candidates": ["hot", "warm"] });
    let mut json_only = json_body.clone();
    json_only["candidates"] = only["candidates"].clone();
    let from_json = expect_status(&admin.post(&path, &json_only).await, 200);
    let compact = streams.body(&only).expect("a boundary");
    let from_columns = expect_status(&post(&admin, &path, &compact).await, 200);
    assert_eq!(masked(from_columns), masked(from_json));

    // Bad parts are refused as for a schedule body, the field named.
    let with_hosts = json!({ "hosts": [] }).to_string();
    let with_vms = json!({ "vms": [] }).to_string();
    let mut cases = part_refusals("{}", &with_hosts, &streams);
    cases.push((
        vec![
            ("request", "application/json", with_vms.as_bytes()),
            ("hosts", ARROW, streams.hosts.as_slice()),
        ],
        400,
        "invalid_field",
        "vms",
    ));
    assert_refused(&admin, &path, cases).await;
    // A part of the wrong name is named as a part of a balance body.
    let body = expect_status(
        &post(
            &admin,
            &path,
            &multipart(&[("extra", ARROW, streams.hosts.as_slice())]),
        )
        .await,
        400,
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("compact balance body")),
        "{body}"
    );
}
