//! The first start's admin token, over the real binary: with no
//! `SANDPIPER_ADMIN_TOKEN`, a token is generated and written once to a file
//! beside the database that only its owner can read, its path is logged,
//! and a restart neither writes another nor invalidates it. (The route ×
//! role table is walked in process, in `tests/api/roles.rs`.)

use crate::support::{Server, expect_status};

#[test]
fn the_first_start_writes_an_admin_token_once_readable_only_by_its_owner() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().expect("temp dir");
    // No SANDPIPER_ADMIN_TOKEN (empty counts as unset): one is generated.
    let no_token = [("SANDPIPER_ADMIN_TOKEN", "")];
    let server = Server::start_fresh(dir.path(), &[], &no_token);
    let file = dir.path().join("sandpiper.admin-token");
    let mode = std::fs::metadata(&file)
        .expect("token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "readable by the owner only");
    let token = std::fs::read_to_string(&file)
        .expect("token")
        .trim()
        .to_owned();
    assert!(
        server.log().contains(&file.display().to_string()),
        "its path is logged"
    );
    let admin = server.client(Some(&token));
    expect_status(&admin.get("/api/v1/tokens"), 200);
    assert!(server.stop().success());

    // A restart neither writes a new token nor invalidates the first.
    std::fs::remove_file(&file).expect("the operator deletes the file");
    let server = Server::start_with(dir.path(), &[], &no_token);
    assert!(!file.exists(), "written once");
    let tokens = expect_status(&server.client(Some(&token)).get("/api/v1/tokens"), 200);
    assert_eq!(tokens.as_array().expect("list").len(), 1);
}
