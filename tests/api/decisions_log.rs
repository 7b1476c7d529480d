//! The decisions log stays bounded whatever was decided (issue #11): a
//! large inline decision leaves a summary row, listing returns small
//! bodies, the answer as returned stays retrievable from
//! `.../decisions/{id}/answer` while kept, and the byte budget
//! (`--decisions-max-mib`) drops the oldest full answers first.

use serde_json::{Value, json};

use crate::support::{Api, Client, expect_status};

/// Hosts in the large decision: enough for a multi-megabyte answer
/// (about 500 bytes per host), few enough to stay quick.
const LARGE_HOSTS: usize = 20_000;

/// Largest listing body accepted for one decision: the summary row is a
/// few KiB (`api::schedule::logged::LOGGED_WHOLE_BYTES` bounds whole rows).
const SMALL_BODY_BYTES: usize = 64 * 1024;

fn hosts(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "id": format!("host-{i:05}"),
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

async fn new_cluster(admin: &Client, name: &str) -> String {
    let cluster = expect_status(
        &admin
            .post("/api/v1/clusters", &json!({ "name": name }))
            .await,
        201,
    );
    format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"))
}

/// Schedules `vm` over `hosts` inline; returns the answer's text.
async fn schedule(admin: &Client, cluster: &str, vm: &str, hosts: &[Value]) -> String {
    let body = json!({ "vm": { "id": vm, "memory_mib": 1024.0, "vcpus": 1 }, "hosts": hosts });
    let reply = admin.post(&format!("{cluster}/schedule"), &body).await;
    expect_status(&reply, 200);
    String::from_utf8(reply.body).expect("UTF-8")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_decision_is_logged_as_a_bounded_row_and_its_answer_kept_apart() {
    let api = Api::start().await;
    let admin = api.admin();
    let cluster = new_cluster(&admin, "large").await;
    let text = schedule(&admin, &cluster, "vm-large", &hosts(LARGE_HOSTS)).await;
    assert!(
        text.len() > 1024 * 1024,
        "the answer is large: {} bytes",
        text.len()
    );
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    let id = answer["decision_id"].as_str().expect("recorded");

    // Listing the log returns small bodies, by cluster and across clusters.
    for path in [
        format!("{cluster}/decisions?limit=1"),
        "/api/v1/decisions?limit=1".to_owned(),
    ] {
        let reply = admin.get(&path).await;
        let page = expect_status(&reply, 200);
        // The figures docs/security.md quotes.
        eprintln!(
            "{LARGE_HOSTS} inline hosts: answer {} bytes; {path}: {} bytes",
            text.len(),
            reply.body.len()
        );
        assert!(
            reply.body.len() < SMALL_BODY_BYTES,
            "{path}: {} bytes",
            reply.body.len()
        );
        let entry = page
            .as_array()
            .map_or_else(|| &page["decisions"][0], |list| &list[0]);
        assert_eq!(entry["id"], id, "{path}");
        let row = &entry["answer"];
        assert_eq!(row["chosen_host"], answer["chosen_host"], "{path}");
        assert_eq!(row["degraded"], answer["degraded"], "{path}");
        assert_eq!(row["survivors"], LARGE_HOSTS, "{path}");
        assert_eq!(
            row["ranked"].as_array().map(Vec::len),
            Some(5),
            "{path}: the best hosts only"
        );
        assert_eq!(
            row["explain"]["winner"], answer["chosen_host"],
            "{path}: the explain record summarised"
        );
        assert_eq!(
            entry["full_answer"],
            format!("{cluster}/decisions/{id}/answer"),
            "{path}"
        );
    }

    // The one decision, by id, is its row too.
    let one = admin.get(&format!("{cluster}/decisions/{id}")).await;
    assert!(
        one.body.len() < SMALL_BODY_BYTES,
        "{} bytes",
        one.body.len()
    );

    // The answer as returned, byte for byte.
    let full = admin.get(&format!("{cluster}/decisions/{id}/answer")).await;
    expect_status(&full, 200);
    assert_eq!(full.header("content-type"), Some("application/json"));
    assert!(full.body == text.as_bytes(), "the full answer as returned");

    // Only under its own cluster.
    let other = new_cluster(&admin, "another").await;
    let reply = admin.get(&format!("{other}/decisions/{id}/answer")).await;
    assert_eq!((reply.status, reply.code().as_str()), (404, "not_found"));

    // A small decision is logged whole; its answer is its row.
    let small = schedule(&admin, &cluster, "vm-small", &hosts(3)).await;
    let small: Value = serde_json::from_str(&small).expect("JSON");
    let small_id = small["decision_id"].as_str().expect("recorded");
    let page = expect_status(
        &admin.get(&format!("{cluster}/decisions?limit=1")).await,
        200,
    );
    assert_eq!(page[0]["answer"], small);
    assert_eq!(page[0]["full_answer"], Value::Null);
    let whole = expect_status(
        &admin
            .get(&format!("{cluster}/decisions/{small_id}/answer"))
            .await,
        200,
    );
    assert_eq!(whole, small);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_byte_budget_drops_the_oldest_full_answers_first() {
    // 1 MiB: one answer over `HOSTS` hosts fits beside the rows, two do not.
    const HOSTS: usize = 1_600;
    let api = Api::start_with(&["--decisions-max-mib", "1"]).await;
    let admin = api.admin();
    let cluster = new_cluster(&admin, "budget").await;
    let hosts = hosts(HOSTS);
    let mut ids = Vec::new();
    for vm in ["vm-1", "vm-2", "vm-3"] {
        let text = schedule(&admin, &cluster, vm, &hosts).await;
        assert!(
            text.len() > 512 * 1024 && text.len() < 900 * 1024,
            "the test needs answers between half the budget and the budget less the rows: {} bytes",
            text.len()
        );
        let answer: Value = serde_json::from_str(&text).expect("JSON");
        ids.push(answer["decision_id"].as_str().expect("recorded").to_owned());
    }
    let mut kept = Vec::new();
    for id in &ids {
        let reply = admin.get(&format!("{cluster}/decisions/{id}/answer")).await;
        kept.push(reply.status);
    }
    assert_eq!(kept, [404, 404, 200], "the newest full answer is kept");
    let dropped = admin
        .get(&format!("{cluster}/decisions/{}/answer", ids[0]))
        .await;
    assert_eq!(dropped.code(), "not_found");

    // Rows stay: they fit the budget on their own.
    let page = expect_status(&admin.get(&format!("{cluster}/decisions")).await, 200);
    let vms: Vec<&str> = page
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|d| d["vm_id"].as_str())
        .collect();
    assert_eq!(vms, ["vm-3", "vm-2", "vm-1"]);
}

/// Schedules `vm` over `hosts` inline with `"explain": explain`; returns
/// the answer's text.
async fn schedule_explained(
    admin: &Client,
    cluster: &str,
    vm: &str,
    hosts: &[Value],
    explain: &str,
) -> String {
    let body = json!({
        "vm": { "id": vm, "memory_mib": 1024.0, "vcpus": 1 },
        "hosts": hosts,
        "explain": explain,
    });
    let reply = admin.post(&format!("{cluster}/schedule"), &body).await;
    expect_status(&reply, 200);
    String::from_utf8(reply.body).expect("UTF-8")
}

/// An answer without the fields two decisions always differ in.
fn without_ids(mut answer: Value) -> Value {
    for key in ["decision_id", "cluster_id"] {
        answer.as_object_mut().expect("an object").remove(key);
    }
    answer
}

#[tokio::test(flavor = "multi_thread")]
async fn an_inline_decision_asked_for_a_summary_answers_what_the_log_keeps_of_a_full_one() {
    const HOSTS: usize = 2_000;
    let api = Api::start().await;
    let admin = api.admin();
    let hosts = hosts(HOSTS);
    // Each decision on its own cluster: nothing reused between them.
    let full_cluster = new_cluster(&admin, "full").await;
    let full = schedule(&admin, &full_cluster, "vm-1", &hosts).await;
    let explicit_cluster = new_cluster(&admin, "explicit").await;
    let explicit = schedule_explained(&admin, &explicit_cluster, "vm-1", &hosts, "full").await;
    let summary_cluster = new_cluster(&admin, "summary").await;
    let summary_text =
        schedule_explained(&admin, &summary_cluster, "vm-1", &hosts, "summary").await;
    let [full, explicit, summary]: [Value; 3] =
        [&full, &explicit, &summary_text].map(|text| serde_json::from_str(text).expect("JSON"));

    // `full` is the default over inline hosts (each unit's time aside).
    for answer in [&full, &explicit] {
        assert_eq!(answer["chosen_host"], full["chosen_host"]);
        assert_eq!(answer["ranked"], full["ranked"]);
        assert_eq!(answer["survivors"], Value::Null, "only a summary counts");
        let scored = answer["explain"]["scores"][0]["hosts"]
            .as_array()
            .map(Vec::len);
        assert_eq!(scored, Some(HOSTS), "the full record: every host's score");
    }

    // The summary is the full answer's log row: the best hosts, the
    // survivors counted, the explain record summarised.
    let row = expect_status(
        &admin
            .get(&format!("{full_cluster}/decisions?limit=1"))
            .await,
        200,
    )[0]["answer"]
        .clone();
    assert_eq!(without_ids(summary.clone()), without_ids(row));
    assert_eq!(summary["survivors"], HOSTS);
    assert_eq!(summary["ranked"].as_array().map(Vec::len), Some(5));
    assert_eq!(summary["ranked"][0], full["ranked"][0]);
    assert_eq!(summary["explain"]["winner"], full["chosen_host"]);
    assert!(
        summary_text.len() < SMALL_BODY_BYTES,
        "{} bytes",
        summary_text.len()
    );

    // Already bounded, it is logged as returned.
    let page = expect_status(
        &admin
            .get(&format!("{summary_cluster}/decisions?limit=1"))
            .await,
        200,
    );
    assert_eq!(page[0]["answer"], summary);
    assert_eq!(page[0]["full_answer"], Value::Null);

    // Anything else is refused, naming the field.
    let body = json!({
        "vm": { "id": "vm-2", "memory_mib": 1024.0, "vcpus": 1 },
        "hosts": &hosts[..3],
        "explain": "everything",
    });
    let reply = admin
        .post(&format!("{summary_cluster}/schedule"), &body)
        .await;
    assert_eq!(reply.status, 400);
    assert!(
        String::from_utf8_lossy(&reply.body).contains("explain"),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
}
