//! The console's static files (`sandpiper::console`, docs/console.md):
//! served without a token, each with its content type and the security
//! headers; the page loads nothing from another origin and runs no inline
//! script; an unknown file is a 404 in the API's error shape.

use crate::support::{Api, expect_status};

#[tokio::test(flavor = "multi_thread")]
async fn the_console_is_served_without_a_token_with_a_strict_policy() {
    let api = Api::start().await;
    let anonymous = api.client(None);
    for (path, content_type) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/index.html", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/pages/policies.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
    ] {
        let reply = anonymous.get(path).await;
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(reply.header("content-type"), Some(content_type), "{path}");
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("cache-control"), Some("no-cache"));
        let csp = reply.header("content-security-policy").unwrap_or_default();
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
    }
    let page = String::from_utf8(anonymous.get("/ui").await.body).expect("UTF-8");
    assert!(page.contains(r#"<script type="module" src="/ui/app.js">"#));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing from elsewhere"
    );

    let missing = anonymous.get("/ui/no-such-page.js").await;
    assert_eq!(expect_status(&missing, 404)["error"]["code"], "not_found");
    let outside = anonymous.get("/ui/../api/v1/clusters").await;
    assert_ne!(outside.status, 200, "no way out of the console's files");
}
