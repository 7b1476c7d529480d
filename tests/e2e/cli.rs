//! The `sandpiper` command line against the real server, as an operator
//! uses it: every noun's table and `-o json`, names instead of ids, an
//! error per noun with the exit status docs/cli.md promises, `login`'s
//! saved server and token, completions, and `explain`'s rendering of a
//! decision checked against a golden file (`golden/cli_explain.txt`; run
//! with `UPDATE_GOLDEN=1` to accept a change).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::{ADMIN_TOKEN, Server};

/// One `sandpiper` run against `server` with `token` (none: no token).
struct Cli {
    url: String,
    token: Option<String>,
    config: PathBuf,
}

impl Cli {
    fn new(server: &Server, token: Option<&str>, dir: &Path) -> Cli {
        Cli {
            url: format!("http://{}", server.addr),
            token: token.map(str::to_owned),
            config: dir.join("cli-config.json"),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sandpiper"));
        command
            .args(args)
            .env_remove("SANDPIPER_URL")
            .env_remove("SANDPIPER_TOKEN")
            .env("SANDPIPER_CONFIG", &self.config)
            .env("SANDPIPER_URL", &self.url);
        if let Some(token) = &self.token {
            command.env("SANDPIPER_TOKEN", token);
        }
        command.output().expect("run sandpiper")
    }

    /// Runs and expects success; stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "sandpiper {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// Runs with `-o json` and expects success; the JSON printed.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).expect("JSON output")
    }

    /// Runs, expects exit status `code`; stderr.
    fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(code),
            "sandpiper {args:?}: {stderr}"
        );
        stderr
    }
}

/// The built-in unit `dir`'s component, written to a file in `into`.
fn component(dir: &str, into: &Path) -> PathBuf {
    let path = into.join(format!("{dir}.wasm"));
    std::fs::write(&path, crate::support::builtin_wasm(dir)).expect("write the component");
    path
}

fn first_line(table: &str) -> &str {
    table.lines().next().unwrap_or_default()
}

#[test]
fn every_noun_works_from_the_command_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = Cli::new(&server, Some(ADMIN_TOKEN), dir.path());

    // Units: push (by file), list, show, versions, rollback, disable.
    let ram = component("even-memory", dir.path());
    let io_ops = component("cpu-even-distribution", dir.path());
    let pushed = admin.json(&[
        "unit",
        "push",
        ram.to_str().expect("path"),
        "--name",
        "Gate",
    ]);
    assert_eq!(pushed["name"], "Gate");
    assert_eq!(pushed["exports"]["score"], true);
    let stderr = admin.fails(
        &[
            "unit",
            "push",
            io_ops.to_str().expect("path"),
            "--name",
            "Gate",
        ],
        4,
    );
    assert!(
        stderr.contains("name_taken, HTTP 409, request "),
        "{stderr}"
    );
    admin.ok(&[
        "unit",
        "push",
        io_ops.to_str().expect("path"),
        "--name",
        "Gate",
        "--replace",
    ]);
    let list = admin.ok(&["unit", "list"]);
    assert_eq!(
        first_line(&list).split_whitespace().collect::<Vec<_>>(),
        [
            "NAME", "ROLES", "ENABLED", "BUILT-IN", "SIZE", "UPLOADED", "BY"
        ]
    );
    assert!(
        list.lines()
            .any(|l| l.starts_with("Gate ") && l.contains("score")),
        "{list}"
    );
    let shown = admin.ok(&["unit", "show", "Memory"]);
    assert!(shown.contains("MaxMemoryOverCommit"), "{shown}");
    let versions = admin.json(&["unit", "versions", "Gate"]);
    assert_eq!(versions.as_array().expect("list").len(), 2);
    assert_eq!(versions[0]["current"], true);
    let restored = admin.json(&["unit", "rollback", "Gate", "1"]);
    assert_eq!(restored["module"], pushed["module"]);
    let table = admin.ok(&["unit", "versions", "Gate"]);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("3 ") && l.trim_end().ends_with('1')),
        "{table}"
    );
    admin.fails(&["unit", "show", "NoSuchUnit"], 3);

    // Policies: create, weights, filters, properties, clone, show.
    admin.ok(&["policy", "clone", "nova_default", "mine"]);
    admin.ok(&["policy", "add-weight", "mine", "Gate", "--factor", "3"]);
    let policy = admin.json(&["policy", "show", "mine"]);
    assert!(
        policy["weights"]
            .as_array()
            .expect("weights")
            .iter()
            .any(|w| w["scheduling_policy_unit"]["name"] == "Gate" && w["factor"] == 3),
        "{policy}"
    );
    admin.ok(&["policy", "remove", "mine", "Gate"]);
    let stderr = admin.fails(&["policy", "set-param", "mine", "NoSuchKey=1"], 6);
    assert!(stderr.contains("unknown_parameter"), "{stderr}");
    admin.fails(&["policy", "add-filter", "nova_default", "Memory"], 4);
    let policies = admin.ok(&["policy", "list"]);
    assert!(
        policies.lines().any(|l| l.starts_with("mine ")),
        "{policies}"
    );

    // Clusters and inventory.
    admin.ok(&["cluster", "create", "lab", "--policy", "mine"]);
    let cluster = admin.json(&["cluster", "show", "lab"]);
    assert_eq!(cluster["scheduling_policy"]["name"], "mine");
    admin.ok(&["cluster", "attach", "lab", "nova_default"]);
    admin.fails(&["cluster", "attach", "lab", "NoSuchPolicy"], 3);
    let hosts = dir.path().join("hosts.json");
    std::fs::write(
        &hosts,
        json!({ "hosts": crate::support::tour_hosts() }).to_string(),
    )
    .expect("hosts");
    let held = admin.json(&["inventory", "push", "lab", hosts.to_str().expect("path")]);
    assert_eq!(
        (held["generation"].clone(), held["hosts"].clone()),
        (json!(1), json!(3))
    );
    let again = admin.json(&["inventory", "push", "lab", hosts.to_str().expect("path")]);
    assert_eq!(again["generation"], 2, "one above the held generation");
    admin.fails(&["inventory", "show", "nowhere"], 3);

    // Schedule over inline hosts, then the decision read back.
    let request = dir.path().join("request.json");
    std::fs::write(
        &request,
        json!({ "vm": { "id": "vm-1", "memory_mib": 4096, "vcpus": 2 }, "hosts": crate::support::tour_hosts() }).to_string(),
    )
    .expect("request");
    let answer = admin.json(&["schedule", "lab", "-f", request.to_str().expect("path")]);
    assert_eq!(answer["chosen_host"], "big");
    let decision = answer["decision_id"]
        .as_str()
        .expect("decision id")
        .to_owned();
    let dry = admin.json(&[
        "schedule",
        "lab",
        "-f",
        request.to_str().expect("path"),
        "--dry-run",
    ]);
    assert_eq!(dry["decision_id"], Value::Null);

    // What-if: another policy for a dry run, and a held decision replayed.
    let none = admin.json(&["policy", "show", "none"]);
    let what_if = admin.json(&[
        "schedule",
        "lab",
        "--vm-id",
        "vm-2",
        "--memory-mib",
        "1024",
        "--dry-run",
        "--policy",
        "none",
    ]);
    assert_eq!(what_if["policy_id"], none["id"], "{what_if}");
    admin.fails(&["schedule", "lab", "--policy", "none"], 2);
    let held = admin.json(&["schedule", "lab", "--vm-id", "vm-2", "--memory-mib", "1024"]);
    let held_id = held["decision_id"].as_str().expect("logged");
    let both = admin.json(&["replay", held_id, "--cluster", "lab", "--policy", "none"]);
    assert_eq!(both["original"]["id"], held_id);
    assert_eq!(both["replay"]["policy_id"], none["id"], "{both}");
    let side_by_side = admin.ok(&["replay", held_id, "--cluster", "lab"]);
    assert!(
        side_by_side.contains("== as decided") && side_by_side.contains("== replayed now"),
        "{side_by_side}"
    );
    admin.fails(&["replay", &decision, "--cluster", "lab"], 4);
    let log = admin.ok(&["decisions", "--cluster", "lab"]);
    assert!(log.contains(&decision), "{log}");
    let explained = admin
        .ok(&["explain", &decision])
        .replace(&decision, "<decision>");
    let explained: String = explained
        .lines()
        .map(|l| match l.split_once(", 20") {
            Some((head, _)) if l.starts_with("decision ") => format!("{head}, <time>)\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/golden/cli_explain.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &explained).expect("write golden");
    }
    let expected = std::fs::read_to_string(&golden).expect("golden (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(
        explained, expected,
        "explain's rendering changed; UPDATE_GOLDEN=1 accepts it"
    );
    admin.fails(&["explain", "00000000-0000-4000-8000-000000000000"], 3);

    // Tokens, and the exit status of a refused token.
    let created = admin.json(&["token", "create", "viewer", "--role", "reader"]);
    let secret = created["secret"].as_str().expect("secret").to_owned();
    let reader = Cli::new(&server, Some(&secret), dir.path());
    reader.ok(&["cluster", "list"]);
    let stderr = reader.fails(&["cluster", "rm", "lab"], 5);
    assert!(stderr.contains("forbidden"), "{stderr}");
    assert!(admin.ok(&["token", "list"]).contains("viewer"));
    admin.ok(&["token", "revoke", "viewer"]);
    reader.fails(&["cluster", "list"], 5);

    // `login` saves the server and token; later commands need neither.
    let anonymous = Cli::new(&server, None, dir.path());
    anonymous.fails(&["cluster", "list"], 5);
    anonymous.ok(&["login", "--server", &anonymous.url, "--token", ADMIN_TOKEN]);
    assert!(anonymous.ok(&["cluster", "list"]).contains("lab"));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&anonymous.config)
            .expect("config")
            .permissions(),
    );
    assert_eq!(mode & 0o077, 0, "the saved token is the owner's only");
    admin.ok(&["cluster", "rm", "lab"]);

    // A server that is not there, and completions.
    let nowhere = Cli {
        url: "http://127.0.0.1:1".to_owned(),
        token: Some(ADMIN_TOKEN.to_owned()),
        config: dir.path().join("none.json"),
    };
    nowhere.fails(&["unit", "list"], 7);
    assert!(admin.ok(&["completions", "bash"]).contains("sandpiper"));
}
