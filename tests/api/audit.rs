//! The audit log (`GET /api/v1/audit`): every admin change, who asked and
//! what came of it, whether the change was made or refused; nothing else.

use serde_json::{Value, json};

use crate::support::{Api, expect_status};

/// The admin token's id, looked up through the API.
async fn admin_token_id(api: &Api) -> String {
    let tokens = expect_status(&api.admin().get("/api/v1/tokens").await, 200);
    tokens
        .as_array()
        .expect("a list")
        .iter()
        .find(|t| t["role"] == "admin")
        .expect("the admin token")["id"]
        .as_str()
        .expect("an id")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_admin_change_is_recorded_with_who_what_and_outcome() {
    let api = Api::start().await;
    let admin = api.admin();
    let admin_name = expect_status(&admin.get("/api/v1/tokens").await, 200)
        .as_array()
        .expect("a list")
        .iter()
        .find(|t| t["role"] == "admin")
        .expect("the admin token")["name"]
        .clone();

    // A change that is made, with the request id the client sent.
    let body = json!({ "name": "ci-engine", "role": "engine" }).to_string();
    let created = admin
        .send(
            "POST",
            "/api/v1/tokens",
            Some(body.into_bytes()),
            Some("application/json"),
            &[("X-Request-Id", "audit-test-1")],
        )
        .await;
    let created = expect_status(&created, 201);
    let engine_id = created["id"].as_str().expect("id").to_owned();
    let engine = api.client(created["secret"].as_str());

    // What is not audited: reads, engine calls, refused tokens.
    expect_status(&admin.get("/api/v1/clusters").await, 200);
    let refused = engine
        .post("/api/v1/tokens", &json!({ "name": "x", "role": "admin" }))
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        api.client(None).delete("/api/v1/tokens/x").await.status,
        401
    );

    // A change that is refused, and one that is made.
    let own = admin_token_id(&api).await;
    let last = admin.delete(&format!("/api/v1/tokens/{own}")).await;
    assert_eq!(last.status, 409);
    assert_eq!(last.code(), "last_admin_token");
    assert_eq!(
        admin
            .delete(&format!("/api/v1/tokens/{engine_id}"))
            .await
            .status,
        204
    );

    let log = expect_status(&admin.get("/api/v1/audit").await, 200);
    let entries = log.as_array().expect("a list");
    let summary: Vec<(String, String, String, u64, Value)> = entries
        .iter()
        .map(|e| {
            (
                e["method"].as_str().expect("method").to_owned(),
                e["route"].as_str().expect("route").to_owned(),
                e["target"].as_str().expect("target").to_owned(),
                e["status"].as_u64().expect("status"),
                e["error_code"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "DELETE".to_owned(),
                "/api/v1/tokens/{id}".to_owned(),
                format!("/api/v1/tokens/{engine_id}"),
                204,
                Value::Null
            ),
            (
                "DELETE".to_owned(),
                "/api/v1/tokens/{id}".to_owned(),
                format!("/api/v1/tokens/{own}"),
                409,
                json!("last_admin_token")
            ),
            (
                "POST".to_owned(),
                "/api/v1/tokens".to_owned(),
                format!("/api/v1/tokens/{engine_id}"),
                201,
                Value::Null
            ),
        ],
        "newest first: {log:#}"
    );
    for e in entries {
        assert_eq!(e["token_id"], json!(own), "who: {e}");
        assert_eq!(e["token_name"], admin_name, "who: {e}");
        assert_eq!(e["role"], "admin", "who: {e}");
        assert!(
            e["at"].as_str().is_some_and(|at| at.ends_with('Z')),
            "when: {e}"
        );
    }
    assert_eq!(entries[2]["request_id"], "audit-test-1");
    assert!(
        entries[1]["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "a request without an id gets one: {}",
        entries[1]
    );

    // Pages: `limit`, then `before` the last one seen.
    let first = expect_status(&admin.get("/api/v1/audit?limit=2").await, 200);
    assert_eq!(first.as_array().expect("a list").len(), 2);
    let next = first[1]["id"].as_i64().expect("id");
    let rest = expect_status(
        &admin.get(&format!("/api/v1/audit?before={next}")).await,
        200,
    );
    assert_eq!(rest.as_array().expect("a list").len(), 1);
    assert_eq!(rest[0]["id"], entries[2]["id"]);
    let bad = admin.get("/api/v1/audit?limit=0").await;
    assert_eq!((bad.status, bad.code().as_str()), (400, "invalid_query"));
    let bad = admin.get("/api/v1/audit?limit=501").await;
    assert_eq!((bad.status, bad.code().as_str()), (400, "invalid_query"));
}

#[tokio::test(flavor = "multi_thread")]
async fn only_admins_read_the_audit_log() {
    let api = Api::start().await;
    let admin = api.admin();
    for role in ["reader", "engine"] {
        let created = expect_status(
            &admin
                .post("/api/v1/tokens", &json!({ "name": role, "role": role }))
                .await,
            201,
        );
        let client = api.client(created["secret"].as_str());
        let reply = client.get("/api/v1/audit").await;
        assert_eq!((reply.status, reply.code().as_str()), (403, "forbidden"));
    }
}
