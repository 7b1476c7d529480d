//! A policy's weights choose what their failure does (issue #11): the
//! weight bodies take `on_failure`, default `fail_open`, and every answer
//! naming a weight says which. What a failing weight then does to a
//! decision is `tests/e2e/hardening_load.rs` (the hostile unit, over real
//! HTTP) and the pipeline's tests.

use serde_json::json;

use crate::support::{Api, expect_status, unit_id};

#[tokio::test(flavor = "multi_thread")]
async fn a_weight_fails_open_unless_its_policy_says_closed() {
    let api = Api::start().await;
    let admin = api.admin();
    let policy = expect_status(
        &admin
            .post("/api/v1/schedulingpolicies", &json!({ "name": "strict" }))
            .await,
        201,
    );
    let policy_path = format!(
        "/api/v1/schedulingpolicies/{}",
        policy["id"].as_str().expect("id")
    );
    let weights = format!("{policy_path}/weights");
    let cpu = unit_id(&admin, "OptimalForCpuEvenDistribution").await;
    let memory = unit_id(&admin, "OptimalForMemoryEvenDistribution").await;

    let open = expect_status(
        &admin
            .post(
                &weights,
                &json!({ "scheduling_policy_unit": { "id": cpu } }),
            )
            .await,
        201,
    );
    assert_eq!(open["on_failure"], "fail_open", "the default");
    let closed = expect_status(
        &admin
            .post(
                &weights,
                &json!({ "scheduling_policy_unit": { "id": memory }, "factor": 2, "on_failure": "fail_closed" }),
            )
            .await,
        201,
    );
    assert_eq!(closed["on_failure"], "fail_closed");

    // Stored: the policy, its list and each weight say the same.
    let listed = expect_status(&admin.get(&weights).await, 200);
    assert_eq!(listed[0]["on_failure"], "fail_open");
    assert_eq!(listed[1]["on_failure"], "fail_closed");
    let whole = expect_status(&admin.get(&policy_path).await, 200);
    assert_eq!(whole["weights"], listed);
    let one = expect_status(&admin.get(&format!("{weights}/{memory}")).await, 200);
    assert_eq!(one, listed[1]);

    // Anything else is refused.
    let reply = admin
        .post(
            &weights,
            &json!({ "scheduling_policy_unit": { "id": cpu }, "on_failure": "sometimes" }),
        )
        .await;
    assert_eq!(
        reply.status,
        400,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );

    // Built-in policies keep the default.
    let builtin = expect_status(&admin.get("/api/v1/schedulingpolicies").await, 200);
    for policy in builtin.as_array().expect("a list") {
        if policy["locked"] == true {
            for weight in policy["weights"].as_array().expect("weights") {
                assert_eq!(weight["on_failure"], "fail_open", "{}", policy["name"]);
            }
        }
    }
}
