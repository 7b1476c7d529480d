//! The OpenAPI document is the engines' contract: it is served without a
//! token, covers every route with its role, body and error shape, lists
//! every stable error code, and is kept as a golden file so that any change
//! to the contract shows up in review (`SANDPIPER_UPDATE_GOLDEN=1` rewrites
//! it).

use std::path::Path;

use serde_json::Value;

use sandpiper::api::access::{Access, ROUTES};
use sandpiper::api::error::ERROR_CODES;

use crate::support::{Api, expect_status};

const GOLDEN: &str = "golden/openapi.json";

#[tokio::test(flavor = "multi_thread")]
async fn the_openapi_document_covers_every_route_and_error() {
    let api = Api::start().await;
    let doc = expect_status(&api.client(None).get("/api/v1/openapi.json").await, 200);

    assert_eq!(doc["openapi"], "3.1.0");
    // The console's static files are served beside the API, not part of
    // its contract (`sandpiper::console`).
    for route in ROUTES
        .iter()
        .filter(|route| !sandpiper::console::PATHS.contains(&route.path))
    {
        let method = route.method.as_str().to_ascii_lowercase();
        let op = &doc["paths"][route.path][&method];
        assert!(op.is_object(), "{method} {} is documented", route.path);
        let description = op["description"].as_str().unwrap_or_default();
        match route.access {
            Access::Public => {
                assert!(
                    op.get("security").is_none(),
                    "{method} {} is public",
                    route.path
                );
                assert!(description.contains("Public"), "{method} {}", route.path);
            }
            Access::Role(role) => {
                assert_eq!(
                    op["security"],
                    serde_json::json!([{ "bearer": [] }]),
                    "{method} {} needs a token",
                    route.path
                );
                assert!(
                    description.contains(&format!("`{role}` role")),
                    "{method} {} names its role",
                    route.path
                );
                for status in ["401", "403"] {
                    assert_eq!(
                        op["responses"][status]["content"]["application/json"]["schema"]["$ref"],
                        "#/components/schemas/ErrorBody",
                        "{method} {} documents {status} in the error shape",
                        route.path
                    );
                }
            }
        }
    }
    let codes = &doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["enum"];
    let listed: Vec<&str> = codes
        .as_array()
        .expect("the error codes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(listed, ERROR_CODES);

    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/api")
        .join(GOLDEN);
    let pretty = serde_json::to_string_pretty(&doc).expect("json") + "\n";
    if std::env::var_os("SANDPIPER_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().expect("dir")).expect("golden dir");
        std::fs::write(&golden, &pretty).expect("write golden");
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with SANDPIPER_UPDATE_GOLDEN=1)",
            golden.display()
        )
    });
    assert!(
        expected == pretty,
        "the OpenAPI document changed; review it and run with SANDPIPER_UPDATE_GOLDEN=1 \
         to accept (golden: {})",
        golden.display()
    );
}

/// The served document is valid OpenAPI 3.1 by `openapi-spec-validator`
/// (pinned; installed by `scripts/install-test-tools.sh`, which the test
/// command runs): every response described, every reference resolving.
#[tokio::test(flavor = "multi_thread")]
async fn the_openapi_document_validates() {
    let tools = std::env::var_os("SANDPIPER_TEST_TOOLS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-tools"),
        std::path::PathBuf::from,
    );
    let validator = tools.join("python/bin/openapi-spec-validator");
    assert!(
        validator.exists(),
        "{} is missing: run scripts/install-test-tools.sh",
        validator.display()
    );
    let api = Api::start().await;
    let doc = api.client(None).get("/api/v1/openapi.json").await;
    assert_eq!(doc.status, 200);
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &doc.body).expect("write the document");
    let out = std::process::Command::new(&validator)
        .arg("--schema")
        .arg("3.1")
        .arg(&file)
        .output()
        .expect("run openapi-spec-validator");
    assert!(
        out.status.success(),
        "openapi-spec-validator refused the document:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
