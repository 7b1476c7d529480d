//! kube-scheduler's extender verbs (`/k8s/{cluster}/filter` and
//! `/prioritize`, issue #14) against golden files: the requests in
//! `golden/extender/*.request.json` are `ExtenderArgs` as kube-scheduler
//! sends them (the v1 field names of `k8s.io/kube-scheduler/extender/v1`
//! `types.go`; the pod a KubeVirt `virt-launcher` pod as `oc get pod -o
//! yaml` prints it in akaliwod/ocp-virtualization
//! `doc/ocp-kubevirt-cat8kv-basic/OcPod.md`, trimmed; nodes as `kubectl get
//! node -o json` prints them, with kubelet's `capacity`/`allocatable`
//! quantities), and each answer is kept next to it
//! (`SANDPIPER_UPDATE_GOLDEN=1` rewrites them). The decisions are also
//! checked one by one, so a golden file accepted by mistake still fails.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{Api, Client, expect_status, policy_id};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/api/golden/extender")
}

fn request(name: &str) -> Value {
    let path = golden_dir().join(format!("{name}.request.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("a JSON request")
}

/// Compares `answer` with the golden answer `name`.
fn golden(name: &str, answer: &Value) {
    let path = golden_dir().join(format!("{name}.answer.json"));
    let pretty = serde_json::to_string_pretty(answer).expect("json") + "\n";
    if std::env::var_os("SANDPIPER_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &pretty).expect("write golden");
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with SANDPIPER_UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    assert!(
        expected == pretty,
        "the answer to {name} changed; review it and run with SANDPIPER_UPDATE_GOLDEN=1 to \
         accept (golden: {}); got:\n{pretty}",
        path.display()
    );
}

/// A cluster named `name` on the built-in `nova_default` policy (Nova's
/// RamFilter, CoreFilter, ComputeFilter, ComputeCapabilitiesFilter, ...
/// and its weighers, RAM first).
async fn cluster(admin: &Client, name: &str) -> Uuid {
    let nova = policy_id(admin, "nova_default").await;
    let created = expect_status(
        &admin
            .post(
                "/api/v1/clusters",
                &json!({ "name": name, "scheduling_policy": { "id": nova } }),
            )
            .await,
        201,
    );
    created["id"].as_str().expect("id").parse().expect("uuid")
}

/// The held inventory an operator pushes for node cache capable use: the
/// same nodes as the inline fixture, in the snapshot format, named by
/// node name.
fn held_hosts() -> Value {
    let host = |id: &str, total: f64, free: f64, status: &str| {
        json!({ "id": id, "status": status, "zone": "zone-a",
                "metrics": { "memory_total_mib": total, "memory_free_mib": free,
                             "cpu_sockets": 1, "cpu_cores": 15.5, "cpu_threads": 15.5 },
                "capabilities": { "kubevirt.io/schedulable": "true" } })
    };
    json!([
        host("worker-big", 64299.0, 63175.0, "up"),
        host("worker-small", 3936.0, 3336.0, "up"),
        host("worker-mid", 16009.0, 14885.0, "up"),
        host("worker-notready", 64299.0, 63175.0, "down"),
        host("worker-large", 32110.0, 30986.0, "up"),
    ])
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().expect("a name"))
        .collect()
}

fn reason<'a>(answer: &'a Value, map: &str, node: &str) -> &'a str {
    answer[map][node]
        .as_str()
        .unwrap_or_else(|| panic!("{node} is in {map}: {answer}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn nodes_sent_whole_are_filtered_and_scored_by_the_policy() {
    let api = Api::start().await;
    let admin = api.admin();
    let id = cluster(&admin, "kube").await;

    // filter, nodeCacheCapable: false; the cluster named by its name.
    let answer = expect_status(
        &admin
            .post("/k8s/kube/filter", &request("filter_nodes"))
            .await,
        200,
    );
    golden("filter_nodes", &answer);
    assert_eq!(answer["Error"], "");
    assert_eq!(answer["NodeNames"], Value::Null);
    let passed: Vec<&str> = answer["Nodes"]["items"]
        .as_array()
        .expect("the nodes that pass, as sent")
        .iter()
        .map(|n| n["metadata"]["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(passed, ["worker-big", "worker-mid", "worker-large"]);
    // Returned whole, as sent.
    assert_eq!(
        answer["Nodes"]["items"][0],
        request("filter_nodes")["Nodes"]["items"][0]
    );
    // Too little memory for the VM's 4345 MiB: the filter is named.
    assert!(reason(&answer, "FailedNodes", "worker-small").starts_with("RamFilter: "));
    // No kubevirt.io/schedulable label, which the pod's nodeSelector asks.
    assert!(
        reason(&answer, "FailedNodes", "worker-nokvm").starts_with("ComputeCapabilitiesFilter: ")
    );
    // NotReady and cordoned: no preemption helps.
    assert!(
        reason(&answer, "FailedAndUnresolvableNodes", "worker-notready")
            .starts_with("ComputeFilter: ")
    );
    assert!(
        reason(&answer, "FailedAndUnresolvableNodes", "worker-cordoned")
            .starts_with("ComputeFilter: ")
    );
    assert_eq!(answer["FailedNodes"].as_object().expect("a map").len(), 2);

    // prioritize on the survivors, by id this time: RAM decides (the CPUs
    // are equal), so the order is big, large, mid.
    let scores = expect_status(
        &admin
            .post(
                &format!("/k8s/{id}/prioritize"),
                &request("prioritize_nodes"),
            )
            .await,
        200,
    );
    golden("prioritize_nodes", &scores);
    assert_eq!(
        scores,
        json!([
            { "Host": "worker-big", "Score": 10 },
            { "Host": "worker-mid", "Score": 8 },
            { "Host": "worker-large", "Score": 9 },
        ])
    );

    // Nothing was claimed, nothing logged: kube-scheduler binds.
    let claims = expect_status(
        &admin.get(&format!("/api/v1/clusters/{id}/claims")).await,
        200,
    );
    assert_eq!(claims["claims"], json!([]), "{claims}");
}

#[tokio::test(flavor = "multi_thread")]
async fn named_nodes_come_from_the_held_inventory() {
    let api = Api::start().await;
    let admin = api.admin();
    let id = cluster(&admin, "kube-cached").await;

    // No inventory yet: the filter says so in its own Error field.
    let answer = expect_status(
        &admin
            .post("/k8s/kube-cached/filter", &request("filter_names"))
            .await,
        200,
    );
    assert!(
        answer["Error"]
            .as_str()
            .is_some_and(|e| e.contains("no inventory")),
        "{answer}"
    );

    expect_status(
        &admin
            .put(
                &format!("/api/v1/clusters/{id}/inventory"),
                &json!({ "generation": 1, "hosts": held_hosts() }),
            )
            .await,
        200,
    );
    let answer = expect_status(
        &admin
            .post("/k8s/kube-cached/filter", &request("filter_names"))
            .await,
        200,
    );
    golden("filter_names", &answer);
    assert_eq!(answer["Error"], "");
    assert_eq!(answer["Nodes"], Value::Null);
    assert_eq!(
        names(&answer["NodeNames"]),
        ["worker-big", "worker-mid", "worker-large"],
        "the survivors, in the order asked, once each"
    );
    assert!(reason(&answer, "FailedNodes", "worker-small").starts_with("RamFilter: "));
    assert!(
        reason(&answer, "FailedAndUnresolvableNodes", "worker-notready")
            .starts_with("ComputeFilter: ")
    );
    assert!(
        reason(&answer, "FailedAndUnresolvableNodes", "worker-gone")
            .contains("not in the cluster's held inventory")
    );

    let scores = expect_status(
        &admin
            .post("/k8s/kube-cached/prioritize", &request("prioritize_names"))
            .await,
        200,
    );
    golden("prioritize_names", &scores);
    assert_eq!(
        scores,
        json!([
            { "Host": "worker-large", "Score": 9 },
            { "Host": "worker-big", "Score": 10 },
            { "Host": "worker-mid", "Score": 8 },
        ])
    );
    let claims = expect_status(
        &admin.get(&format!("/api/v1/clusters/{id}/claims")).await,
        200,
    );
    assert_eq!(claims["claims"], json!([]), "{claims}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_the_extenders_own_error() {
    let api = Api::start_with(&["--max-request-mib", "1"]).await;
    let admin = api.admin();
    cluster(&admin, "kube").await;

    let filter = |body: Vec<u8>| {
        let admin = admin.clone();
        async move {
            admin
                .send(
                    "POST",
                    "/k8s/kube/filter",
                    Some(body),
                    Some("application/json"),
                    &[],
                )
                .await
        }
    };
    let error_of = |reply: &crate::support::Reply| -> String {
        let answer = expect_status(reply, 200);
        assert_eq!(answer["NodeNames"], Value::Null, "{answer}");
        assert_eq!(answer["Nodes"], Value::Null, "{answer}");
        answer["Error"].as_str().expect("Error").to_owned()
    };

    // Malformed JSON, no pod, both node forms, a bad quantity.
    let malformed = error_of(&filter(b"{\"Pod\": ".to_vec()).await);
    assert!(!malformed.is_empty());
    let no_pod = error_of(&filter(br#"{"NodeNames": ["a"]}"#.to_vec()).await);
    assert!(no_pod.contains("`Pod` is required"), "{no_pod}");
    let pod = json!({ "metadata": { "name": "p", "namespace": "ns" } });
    let both = json!({ "Pod": pod, "NodeNames": ["a"], "Nodes": { "items": [] } });
    let both = error_of(&filter(both.to_string().into_bytes()).await);
    assert!(both.contains("not both"), "{both}");
    let bad = json!({ "Pod": { "metadata": { "name": "p" }, "spec": { "containers": [
        { "resources": { "requests": { "memory": "lots" } } } ] } }, "NodeNames": ["a"] });
    let bad = error_of(&filter(bad.to_string().into_bytes()).await);
    assert!(
        bad.contains("Pod.spec.containers[0].resources.requests.memory")
            && bad.contains("\"lots\""),
        "{bad}"
    );
    // Over the request size limit.
    let huge = json!({ "Pod": pod, "NodeNames": vec!["n".repeat(1000); 1100] });
    let huge = error_of(&filter(huge.to_string().into_bytes()).await);
    assert!(huge.contains("1048576"), "{huge}");
    // An unknown cluster.
    let unknown = admin
        .post(
            "/k8s/no-such-cluster/filter",
            &json!({ "Pod": pod, "NodeNames": [] }),
        )
        .await;
    assert!(error_of(&unknown).contains("no-such-cluster"));

    // prioritize has no Error field: the JSON API's status and error body.
    let reply = admin
        .send(
            "POST",
            "/k8s/kube/prioritize",
            Some(b"{\"Pod\": ".to_vec()),
            Some("application/json"),
            &[],
        )
        .await;
    assert_eq!(
        reply.status,
        400,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let reply = admin
        .post(
            "/k8s/no-such-cluster/prioritize",
            &json!({ "Pod": pod, "NodeNames": [] }),
        )
        .await;
    assert_eq!(reply.status, 404);

    // An engine's token is needed, as for every decision.
    let anonymous = api.client(None);
    let reply = anonymous
        .post("/k8s/kube/filter", &json!({ "Pod": pod, "NodeNames": [] }))
        .await;
    assert_eq!(reply.status, 401);
}
