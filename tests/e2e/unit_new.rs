//! `sandpiper unit new` as an author uses it: generate a project in each
//! language, build it with its own `build.sh`, pass its own fixture with
//! `sandpiper unit test -o json`, and upload it to a real server, which
//! must read the roles asked for from the component. The refusals (a bad
//! name, C with a balance role, an occupied directory) exit 2 and write
//! nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::{Server, expect_status};

fn sandpiper(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sandpiper"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run sandpiper")
}

fn expect_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every file under `dir`, relative to it.
fn walk(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("under dir");
                files.push(relative.display().to_string());
            }
        }
    }
    files
}

/// Where a generated Rust project builds, kept between runs so its
/// dependencies compile once: `<target>/test-guests/unit-new`.
fn rust_target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.ancestors()
        .nth(3)
        .expect("tests run from <target>/<profile>/deps")
        .join("test-guests/unit-new")
}

/// Generates `name` in `lang` with `roles` under `dir`, builds it, checks
/// that every one of its `cases` passes, and returns the component.
fn generate_build_and_test(dir: &Path, lang: &str, roles: &str, name: &str, cases: u64) -> Vec<u8> {
    let generated = sandpiper(
        &[
            "unit", "new", name, "--lang", lang, "--roles", roles, "-o", "json",
        ],
        dir,
    );
    expect_success(&generated, "unit new");
    let written: Value = serde_json::from_slice(&generated.stdout).expect("a JSON report");
    assert_eq!(written["dir"], name);
    let project = dir.join(name);
    // Every file the report lists is there, and nothing else.
    let mut listed: Vec<String> = written["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f.as_str().expect("a path").to_owned())
        .collect();
    listed.sort();
    let mut on_disk = walk(&project);
    on_disk.sort();
    assert_eq!(listed, on_disk, "{lang}");

    let mut build = Command::new(project.join("build.sh"));
    // The outer build's settings must not leak into the nested cargo.
    sandpiper_guest_build::nested::scrub(&mut build);
    if lang == "rust" {
        build.env("CARGO_TARGET_DIR", rust_target_dir());
    }
    let built = build.output().expect("run build.sh");
    expect_success(&built, &format!("{lang} build.sh"));

    let wasm = format!("build/{name}.wasm");
    let tested = sandpiper(
        &["unit", "test", &wasm, "cases.json", "-o", "json"],
        &project,
    );
    expect_success(&tested, &format!("{lang} unit test"));
    let report: Value = serde_json::from_slice(&tested.stdout).expect("a JSON report");
    assert_eq!(report["passed"], cases, "{lang}: {report:#}");
    assert_eq!(report["failed"], 0, "{lang}: {report:#}");
    let expected_roles: Vec<&str> = roles.split(',').collect();
    assert_eq!(report["unit"]["roles"], json!(expected_roles), "{lang}");
    assert_eq!(report["unit"]["name"], name);

    std::fs::read(project.join(wasm)).expect("the component")
}

/// Uploads `wasm` and checks the unit's exports are the roles asked for.
fn upload(server: &Server, wasm: &[u8], name: &str, exports: Value) {
    let reply = server
        .admin()
        .post_wasm("/api/v1/schedulingpolicyunits", wasm);
    let unit = expect_status(&reply, 201);
    assert_eq!(unit["name"], name);
    assert_eq!(unit["exports"], exports);
}

#[test]
fn a_rust_unit_with_every_role_builds_passes_and_uploads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = generate_build_and_test(dir.path(), "rust", "filter,score,balance", "MemoryFit", 4);
    let server = Server::start(dir.path());
    upload(
        &server,
        &wasm,
        "MemoryFit",
        json!({ "filter": true, "score": true, "balance": true }),
    );
}

#[test]
fn a_c_filter_and_score_unit_builds_passes_and_uploads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = generate_build_and_test(dir.path(), "c", "filter,score", "CFit", 2);
    let server = Server::start(dir.path());
    upload(
        &server,
        &wasm,
        "CFit",
        json!({ "filter": true, "score": true, "balance": false }),
    );
}

// Python's and JavaScript's components take seconds to compile; `unit
// test` compiles them under the server's own limits, which is what an
// upload would check.
#[test]
fn a_python_filter_and_balance_unit_builds_and_passes() {
    let dir = tempfile::tempdir().expect("temp dir");
    generate_build_and_test(dir.path(), "python", "filter,balance", "py-fit", 4);
}

#[test]
fn a_javascript_score_and_balance_unit_builds_and_passes() {
    let dir = tempfile::tempdir().expect("temp dir");
    generate_build_and_test(dir.path(), "js", "score,balance", "JsFit", 3);
}

#[test]
fn refusals_exit_2_and_write_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases: [(&[&str], &str); 4] = [
        (
            &["9lives", "--lang", "rust", "--roles", "filter"],
            "invalid unit name",
        ),
        (
            &["Balancer", "--lang", "c", "--roles", "balance"],
            "balance role",
        ),
        (
            &[
                "Fit",
                "--lang",
                "rust",
                "--roles",
                "filter",
                "--sdk",
                "/nonexistent",
            ],
            "not a Sandpiper source tree",
        ),
        (&["Fit", "--lang", "cobol", "--roles", "filter"], "cobol"),
    ];
    for (args, message) in cases {
        let mut all = vec!["unit", "new"];
        all.extend_from_slice(args);
        let output = sandpiper(&all, dir.path());
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);

    // An occupied directory is never written into.
    std::fs::create_dir(dir.path().join("Fit")).expect("mkdir");
    std::fs::write(dir.path().join("Fit/notes.txt"), "mine").expect("write");
    let output = sandpiper(
        &["unit", "new", "Fit", "--lang", "python", "--roles", "score"],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists"));
    let left: Vec<_> = std::fs::read_dir(dir.path().join("Fit"))
        .expect("dir")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(left, ["notes.txt"]);
}
