//! A unit's life over the API: the same bytes are one module however often
//! they are uploaded; a disabled unit is left out of decisions; a replaced
//! module takes over the next decision; a deleted unit takes its module
//! along when nothing else uses it. Also: the decisions log keeps only its
//! configured number of decisions, and an upload whose compile runs out of
//! time or memory (in the real compile child) is refused without changing
//! anything.

use serde_json::{Value, json};

use crate::support::{Api, Client, builtin_wasm, distinct_copy, dump, expect_status, tour_hosts};

async fn schedule(client: &Client, cluster: &str) -> Value {
    expect_status(
        &client
            .post(
                &format!("{cluster}/schedule"),
                &json!({ "vm": { "id": "vm-1", "memory_mib": 4096, "vcpus": 2 }, "hosts": tour_hosts() }),
            )
            .await,
        200,
    )
}

fn filter_units(answer: &Value) -> Vec<String> {
    answer["explain"]["filters"]
        .as_array()
        .expect("filters")
        .iter()
        .map(|f| f["unit"].as_str().expect("unit").to_owned())
        .collect()
}

fn count_rows(dump: &str, table: &str) -> usize {
    dump.split(&format!("== {table}\n"))
        .nth(1)
        .map_or(0, |rest| {
            rest.lines().take_while(|l| !l.starts_with("== ")).count()
        })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_unit_can_be_shared_disabled_replaced_and_deleted() {
    let api = Api::start_with(&["--decisions-retained", "2"]).await;
    let admin = api.admin();
    let units = "/api/v1/schedulingpolicyunits";
    let modules_at_start = count_rows(&dump(&api.db).await, "modules");

    // The same bytes under two names: two units, one module.
    let first = expect_status(
        &admin
            .post_wasm(&format!("{units}?name=One"), builtin_wasm("memory"))
            .await,
        201,
    );
    let second = expect_status(
        &admin
            .send(
                "POST",
                units,
                Some(builtin_wasm("memory").to_vec()),
                Some("application/wasm"),
                &[
                    ("Sandpiper-Unit-Name", "Two"),
                    ("Sandpiper-Unit-Description", "named by headers"),
                ],
            )
            .await,
        201,
    );
    assert_eq!(second["name"], "Two");
    assert_eq!(second["description"], "named by headers");
    assert_eq!(first["module"], second["module"]);
    assert_eq!(
        count_rows(&dump(&api.db).await, "modules"),
        modules_at_start,
        "the built-in Memory unit already stored these bytes"
    );

    let policy = expect_status(
        &admin
            .post("/api/v1/schedulingpolicies", &json!({ "name": "p" }))
            .await,
        201,
    );
    let policy_path = format!(
        "/api/v1/schedulingpolicies/{}",
        policy["id"].as_str().expect("id")
    );
    expect_status(
        &admin
            .post(
                &format!("{policy_path}/filters"),
                &json!({ "scheduling_policy_unit": { "id": first["id"] } }),
            )
            .await,
        201,
    );
    let cluster = expect_status(
        &admin
            .post(
                "/api/v1/clusters",
                &json!({ "name": "c", "scheduling_policy": { "id": policy["id"] } }),
            )
            .await,
        201,
    );
    let cluster_path = format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"));
    let answer = schedule(&admin, &cluster_path).await;
    assert_eq!(filter_units(&answer), ["One"]);
    assert_eq!(answer["skipped_units"], json!([]));

    // Disabled: left out of decisions, and kept out of new policies.
    let first_path = format!("{units}/{}", first["id"].as_str().expect("id"));
    let disabled = expect_status(
        &admin
            .post(&format!("{first_path}/disable"), &json!({}))
            .await,
        200,
    );
    assert_eq!(disabled["enabled"], false);
    let answer = schedule(&admin, &cluster_path).await;
    assert_eq!(filter_units(&answer), Vec::<String>::new());
    assert_eq!(answer["skipped_units"], json!(["One"]));
    let other = expect_status(
        &admin
            .post("/api/v1/schedulingpolicies", &json!({ "name": "other" }))
            .await,
        201,
    );
    let reply = admin
        .post(
            &format!(
                "/api/v1/schedulingpolicies/{}/filters",
                other["id"].as_str().expect("id")
            ),
            &json!({ "scheduling_policy_unit": { "id": first["id"] } }),
        )
        .await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "unit_disabled")
    );
    expect_status(
        &admin
            .post(&format!("{first_path}/enable"), &json!({}))
            .await,
        200,
    );

    // Replaced: the next decision runs the new module (the CPU filter,
    // which rejects the hosts with too few cores for a 24-vCPU VM).
    let replaced = expect_status(
        &admin
            .put_wasm(&format!("{first_path}/module"), builtin_wasm("cpu"))
            .await,
        200,
    );
    assert_eq!(replaced["name"], "One", "the name stays");
    assert_ne!(replaced["module"], first["module"]);
    let answer = expect_status(
        &admin
            .post(
                &format!("{cluster_path}/schedule"),
                &json!({ "vm": { "id": "vm-2", "memory_mib": 1, "vcpus": 24 }, "hosts": tour_hosts() }),
            )
            .await,
        200,
    );
    let rejected: Vec<&str> = answer["explain"]["filters"][0]["rejected"]
        .as_array()
        .expect("rejections")
        .iter()
        .flat_map(|r| {
            r["hosts"]
                .as_array()
                .expect("hosts")
                .iter()
                .map(|h| h.as_str().expect("id"))
        })
        .collect();
    assert_eq!(rejected, ["small", "mid"], "{answer:#}");

    // The log keeps the last two decisions only.
    let decisions = expect_status(&admin.get(&format!("{cluster_path}/decisions")).await, 200);
    let vms: Vec<&str> = decisions
        .as_array()
        .expect("list")
        .iter()
        .map(|d| d["vm_id"].as_str().expect("vm"))
        .collect();
    assert_eq!(vms, ["vm-2", "vm-1"], "newest first, two kept");

    // Deleting: out of every policy, a unit goes; the modules stay, since
    // the built-in CPU and Memory units share them.
    expect_status(
        &admin
            .delete(&format!(
                "{policy_path}/filters/{}",
                first["id"].as_str().expect("id")
            ))
            .await,
        204,
    );
    let reply = admin.delete(&first_path).await;
    assert_eq!(
        reply.status,
        204,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(admin.get(&first_path).await.status, 404);
    expect_status(
        &admin
            .delete(&format!("{units}/{}", second["id"].as_str().expect("id")))
            .await,
        204,
    );
    assert_eq!(
        count_rows(&dump(&api.db).await, "modules"),
        modules_at_start
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_whose_compile_runs_out_of_time_or_memory_changes_nothing() {
    for (flags, code) in [
        (["--compile-timeout-secs", "0"], "module_compile_timeout"),
        (["--compile-memory-mib", "8"], "module_compile_failed"),
    ] {
        let api = Api::start_with(&flags).await;
        let before = dump(&api.db).await;
        // Bytes the server has not compiled before (a built-in's are).
        let wasm = distinct_copy(builtin_wasm("cpu"), "never-compiled");
        let reply = api
            .admin()
            .post_wasm("/api/v1/schedulingpolicyunits?name=Slow", &wasm)
            .await;
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (422, code),
            "{flags:?}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(dump(&api.db).await, before, "{flags:?}");
        let health = expect_status(&api.client(None).get("/healthz").await, 200);
        assert_eq!(health["status"], "ok", "the server itself is unharmed");
    }
}

/// A component whose one core function declares `locals` locals.
fn component_with_locals(locals: u32) -> Vec<u8> {
    use wasm_encoder::{CodeSection, Function, FunctionSection, Module, TypeSection, ValType};
    let mut types = TypeSection::new();
    types.ty().function([], []);
    let mut functions = FunctionSection::new();
    functions.function(0);
    let mut body = Function::new([(locals, ValType::I32)]);
    body.raw([0x0b]); // end
    let mut code = CodeSection::new();
    code.function(&body);
    let mut module = Module::new();
    module.section(&types).section(&functions).section(&code);
    let mut component = wasm_encoder::Component::new();
    component.section(&wasm_encoder::ModuleSection(&module));
    component.finish()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_over_a_validation_limit_gets_its_own_code_and_changes_nothing() {
    let api = Api::start().await;
    let before = dump(&api.db).await;
    let reply = api
        .admin()
        .post_wasm(
            "/api/v1/schedulingpolicyunits?name=Locals",
            &component_with_locals(50_001),
        )
        .await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (422, "module_compiler_limit"),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let message = reply.json()["error"]["message"]
        .as_str()
        .expect("message")
        .to_owned();
    assert!(
        message.contains("function 0") && message.contains("50001") && message.contains("50000"),
        "{message}"
    );
    assert_eq!(dump(&api.db).await, before);
}
