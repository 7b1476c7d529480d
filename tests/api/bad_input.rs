//! Every bad input gets its documented status and error code, in the one
//! error shape, and leaves the store exactly as it was (a dump of every
//! table before and after must match). The cases are a table in
//! `cases/bad_input.json`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::support::{Api, Client, Reply, builtin_wasm, dump, expect_status, tour_hosts, unit_id};

/// The table of cases.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[expect(dead_code, reason = "read by people: what the placeholders mean")]
    description: String,
    /// `sandpiper serve` flags of the application the cases run against.
    flags: Vec<String>,
    cases: Vec<Case>,
}

/// One bad request and the error it must get.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    what: String,
    method: String,
    /// With `{placeholders}` for the fixture's ids.
    path: String,
    body: Option<CaseBody>,
    /// Overrides the body's own content type.
    content_type: Option<String>,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum CaseBody {
    /// JSON, `{placeholders}` in strings filled in.
    Json(Value),
    /// Bytes as written; needs a `content_type`.
    Text(String),
    /// WebAssembly text, compiled by `wat`.
    Wat(String),
    /// The component of the built-in unit in `policies/<dir>`.
    Builtin(String),
    /// This many zero bytes.
    Zeros(usize),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    status: u16,
    code: String,
    /// Fields `error.details` must have, with these values.
    #[serde(default)]
    details: BTreeMap<String, Value>,
    /// A substring of `error.message`.
    message_contains: Option<String>,
}

fn table() -> Table {
    serde_json::from_str(include_str!("cases/bad_input.json"))
        .expect("cases/bad_input.json is a table of cases")
}

/// What the cases' placeholders stand for.
struct Fixture {
    unit: String,
    policy: String,
    cluster: String,
    param: String,
    values: BTreeMap<&'static str, Value>,
}

impl Fixture {
    /// `text` with every `{name}` replaced by its (string) value.
    fn fill(&self, text: &str) -> String {
        self.values
            .iter()
            .fold(text.to_owned(), |text, (name, value)| {
                match value.as_str() {
                    Some(value) => text.replace(&format!("{{{name}}}"), value),
                    None => text,
                }
            })
    }

    /// `value` with every string that is exactly `{name}` replaced by that
    /// value (text or not), and placeholders in other strings filled in.
    fn fill_json(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => {
                let whole = s
                    .strip_prefix('{')
                    .and_then(|s| s.strip_suffix('}'))
                    .and_then(|name| self.values.get(name));
                whole
                    .cloned()
                    .unwrap_or_else(|| Value::String(self.fill(s)))
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.fill_json(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.fill_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// A unit (first filter of a policy), the policy attached to a cluster.
async fn fixture(admin: &Client) -> Fixture {
    let unit = expect_status(
        &admin
            .post_wasm(
                "/api/v1/schedulingpolicyunits?name=Mine",
                builtin_wasm("memory"),
            )
            .await,
        201,
    );
    let unit_id_text = unit["id"].as_str().expect("id").to_owned();
    let policy = expect_status(
        &admin
            .post("/api/v1/schedulingpolicies", &json!({ "name": "p" }))
            .await,
        201,
    );
    let policy_id = policy["id"].as_str().expect("id").to_owned();
    expect_status(
        &admin
            .post(
                &format!("/api/v1/schedulingpolicies/{policy_id}/filters"),
                &json!({ "scheduling_policy_unit": { "id": unit_id_text }, "position": -1 }),
            )
            .await,
        201,
    );
    let cluster = expect_status(
        &admin
            .post(
                "/api/v1/clusters",
                &json!({ "name": "c", "scheduling_policy": { "id": policy_id } }),
            )
            .await,
        201,
    );
    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies").await, 200);
    let locked = policies
        .as_array()
        .expect("list")
        .iter()
        .find(|p| p["locked"] == true)
        .expect("a built-in policy")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let tokens = expect_status(&admin.get("/api/v1/tokens").await, 200);
    let admin_token = tokens[0]["id"].as_str().expect("id").to_owned();
    let param = unit["params"][0]["name"]
        .as_str()
        .expect("a parameter")
        .to_owned();
    let cluster_id = cluster["id"].as_str().expect("id").to_owned();
    let internal_unit = unit_id(admin, "CPU").await;
    let score_unit = unit_id(admin, "OptimalForMemoryEvenDistribution").await;
    let values = BTreeMap::from([
        ("unit", json!(unit_id_text)),
        ("policy", json!(policy_id)),
        ("cluster", json!(cluster_id)),
        ("locked", json!(locked)),
        ("internal_unit", json!(internal_unit)),
        ("score_unit", json!(score_unit)),
        ("param", json!(param)),
        ("admin_token", json!(admin_token)),
        ("tour_hosts", tour_hosts()),
    ]);
    Fixture {
        unit: unit_id_text,
        policy: policy_id,
        cluster: cluster_id,
        param,
        values,
    }
}

/// Sends `case`'s request.
async fn send(admin: &Client, f: &Fixture, case: &Case) -> Reply {
    let (body, content_type) = match &case.body {
        None => (None, None),
        Some(CaseBody::Json(value)) => (
            Some(f.fill_json(value).to_string().into_bytes()),
            Some("application/json"),
        ),
        Some(CaseBody::Text(text)) => (Some(text.as_bytes().to_vec()), None),
        Some(CaseBody::Wat(text)) => (
            Some(wat::parse_str(text).expect("valid WebAssembly text")),
            Some("application/wasm"),
        ),
        Some(CaseBody::Builtin(dir)) => {
            (Some(builtin_wasm(dir).to_vec()), Some("application/wasm"))
        }
        Some(CaseBody::Zeros(n)) => (Some(vec![0u8; *n]), Some("application/wasm")),
    };
    let content_type = case.content_type.as_deref().or(content_type);
    let path = f.fill(&case.path);
    assert!(
        !path.contains('{'),
        "{}: an unknown placeholder in {path}",
        case.what
    );
    admin
        .send(&case.method, &path, body, content_type, &[])
        .await
}

#[track_caller]
fn check(case: &Case, reply: &Reply) {
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (case.expect.status, case.expect.code.as_str()),
        "{}: {}",
        case.what,
        String::from_utf8_lossy(&reply.body)
    );
    let error = &reply.json()["error"];
    let message = error["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{}: a message", case.what);
    assert!(
        error["details"].is_object(),
        "{}: details is an object",
        case.what
    );
    for (field, value) in &case.expect.details {
        assert_eq!(
            &error["details"][field], value,
            "{}: details.{field}",
            case.what
        );
    }
    if let Some(needle) = &case.expect.message_contains {
        assert!(
            message.contains(needle.as_str()),
            "{}: {message}",
            case.what
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bad_input_gets_its_status_and_code_and_changes_nothing() {
    let table = table();
    let flags: Vec<&str> = table.flags.iter().map(String::as_str).collect();
    let api = Api::start_with(&flags).await;
    let admin = api.admin();
    let f = fixture(&admin).await;
    let before = dump(&api.db).await;

    assert!(!table.cases.is_empty());
    for case in &table.cases {
        let reply = send(&admin, &f, case).await;
        check(case, &reply);
    }

    assert_eq!(
        dump(&api.db).await,
        before,
        "no bad input changed the store"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_that_would_strand_a_parameter_value_is_refused_and_changes_nothing() {
    let api = Api::start().await;
    let admin = api.admin();
    let f = fixture(&admin).await;
    let policy = format!("/api/v1/schedulingpolicies/{}", f.policy);
    let cluster = format!("/api/v1/clusters/{}", f.cluster);
    // The cluster overrides the filter's parameter.
    expect_status(
        &admin
            .put(
                &cluster,
                &json!({ "properties": [ { "name": f.param, "value": "120" } ] }),
            )
            .await,
        200,
    );
    let before = dump(&api.db).await;

    // Removing the only unit that declares it would leave the override
    // unusable.
    let reply = admin.delete(&format!("{policy}/filters/{}", f.unit)).await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "params_would_break")
    );
    // So would moving the cluster to a policy whose units do not declare it.
    let other = expect_status(
        &admin
            .post("/api/v1/schedulingpolicies", &json!({ "name": "empty" }))
            .await,
        201,
    );
    let after_add = dump(&api.db).await;
    let reply = admin
        .put(
            &cluster,
            &json!({ "scheduling_policy": { "id": other["id"] } }),
        )
        .await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "params_would_break")
    );
    assert_eq!(dump(&api.db).await, after_add);
    // Replacing the unit's module with one that does not declare it, too.
    let reply = admin
        .put_wasm(
            &format!("/api/v1/schedulingpolicyunits/{}/module", f.unit),
            builtin_wasm("cpu"),
        )
        .await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "params_would_break"),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(dump(&api.db).await, after_add);
    assert_ne!(before, after_add);
}
