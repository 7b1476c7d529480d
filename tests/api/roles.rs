//! The role table, walked: every route of the API (as declared in
//! `sandpiper::api::access::ROUTES`) with every role and with no token.
//! A caller below the route's role gets 401 (no or bad token) or 403 (too
//! weak a role); a caller at or above it gets past the check. Requests carry
//! placeholder ids and empty bodies, so those that pass fail validation and
//! change nothing.

use serde_json::json;

use sandpiper::api::access::{Access, ROUTES};
use sandpiper::auth::Role;

use crate::support::{Api, Client, dump, expect_status};

/// A concrete path for a route template: every `{...}` becomes an id that
/// does not exist.
fn concrete(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').expect("closing brace") + start;
        out.push_str("00000000-0000-4000-8000-00000000beef");
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn every_route_answers_every_role_as_declared() {
    let api = Api::start().await;
    let admin = api.admin();
    let mut clients: Vec<(Option<Role>, Client)> = vec![(None, api.client(None))];
    for role in [Role::Reader, Role::Engine] {
        let created = expect_status(
            &admin
                .post(
                    "/api/v1/tokens",
                    &json!({ "name": role.name(), "role": role.name() }),
                )
                .await,
            201,
        );
        clients.push((Some(role), api.client(created["secret"].as_str())));
    }
    clients.push((Some(Role::Admin), admin.clone()));
    let before = dump(&api.db).await;

    let mut checked = 0;
    for route in ROUTES {
        let path = concrete(route.path);
        let method = route.method.as_str();
        let body = matches!(method, "POST" | "PUT").then(|| b"{}".to_vec());
        for (role, client) in &clients {
            let reply = client
                .send(method, &path, body.clone(), Some("application/json"), &[])
                .await;
            let expected = match (route.access, role) {
                (Access::Public, _) => None,
                (Access::Role(_), None) => Some((401, "unauthenticated")),
                (Access::Role(needed), Some(have)) if !have.allows(needed) => {
                    Some((403, "forbidden"))
                }
                (Access::Role(_), Some(_)) => None,
            };
            let who = role.map_or("no token", Role::name);
            match expected {
                Some((status, code)) => {
                    assert_eq!(
                        (reply.status, reply.code().as_str()),
                        (status, code),
                        "{method} {path} as {who}"
                    );
                }
                None => assert!(
                    reply.status != 401 && reply.status != 403,
                    "{method} {path} as {who} was refused: {}",
                    String::from_utf8_lossy(&reply.body)
                ),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, ROUTES.len() * 4);

    // A token that does not exist, and a revoked one, are nobody.
    let nobody = api.client(Some(
        "sp_0000000000000000000000000000000000000000000000000000000000000000",
    ));
    assert_eq!(nobody.get("/api/v1/clusters").await.status, 401);
    let reader = &clients[1].1;
    let tokens = expect_status(&admin.get("/api/v1/tokens").await, 200);
    let reader_id = tokens
        .as_array()
        .expect("list")
        .iter()
        .find(|t| t["role"] == "reader")
        .expect("the reader token")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(reader.get("/api/v1/clusters").await.status, 200);
    let revoked = admin.delete(&format!("/api/v1/tokens/{reader_id}")).await;
    assert_eq!(revoked.status, 204);
    let reply = reader.get("/api/v1/clusters").await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (401, "unauthenticated")
    );
    assert!(reply.header("www-authenticate").is_some());

    // Nothing but the revocation changed the store.
    let after = dump(&api.db).await;
    let changed: Vec<_> = before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed.len(),
        1,
        "only the revoked token's row changed: {changed:#?}"
    );
}
