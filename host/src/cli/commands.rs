//! What each noun's verbs do: the API calls, and how their answers print.

use std::io::{IsTerminal, Read};
use std::time::Instant;

use serde_json::{Value, json};
use uuid::Uuid;

use super::client::{Body, CliError, Client};
use super::output::{Format, Table, cell, fields, print};
use super::{
    ClusterCommand, DecisionsArgs, FilterPosition, InventoryCommand, PolicyCommand, Remote,
    ReplayArgs, ScheduleArgs, TokenCommand, UnitCommand, config,
};

const UNITS: &str = "/api/v1/schedulingpolicyunits";
const POLICIES: &str = "/api/v1/schedulingpolicies";
const CLUSTERS: &str = "/api/v1/clusters";
const TOKENS: &str = "/api/v1/tokens";

/// The id of the resource called `key` (its id, or else its name) in the
/// collection at `path`.
fn resolve(client: &Client, path: &str, what: &str, key: &str) -> Result<String, CliError> {
    if Uuid::parse_str(key).is_ok() {
        return Ok(key.to_owned());
    }
    let list = client.get(path)?;
    list.as_array()
        .into_iter()
        .flatten()
        .find(|item| item["name"].as_str() == Some(key))
        .and_then(|item| item["id"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| CliError::Api {
            status: 404,
            code: "not_found".to_owned(),
            message: format!("no {what} called `{key}`"),
            request_id: None,
        })
}

fn roles(exports: &Value) -> String {
    let roles: Vec<&str> = ["filter", "score", "balance"]
        .into_iter()
        .filter(|r| exports[*r].as_bool() == Some(true))
        .collect();
    roles.join(",")
}

fn mib(bytes: &Value) -> String {
    bytes.as_u64().map_or("-".to_owned(), |b| {
        format!("{:.1} MiB", b as f64 / 1_048_576.0)
    })
}

pub fn unit(remote: &Remote, command: UnitCommand) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let out = remote.output;
    let id = |key: &str| resolve(&client, UNITS, "unit", key);
    match command {
        UnitCommand::Test(_) | UnitCommand::New(_) => Err(CliError::Usage(
            "`unit test` and `unit new` run locally".to_owned(),
        )),
        UnitCommand::List => {
            let list = client.get(UNITS)?;
            print(out, &list, || {
                let mut t = Table::new([
                    "NAME",
                    "ROLES",
                    "ENABLED",
                    "BUILT-IN",
                    "SIZE",
                    "UPLOADED BY",
                ]);
                for u in list.as_array().into_iter().flatten() {
                    t.row(vec![
                        cell(&u["name"]),
                        roles(&u["exports"]),
                        cell(&u["enabled"]),
                        cell(&u["internal"]),
                        mib(&u["module"]["size_bytes"]),
                        cell(&u["uploaded_by"]),
                    ]);
                }
                t.render()
            });
            Ok(())
        }
        UnitCommand::Show { unit } => {
            let u = client.get(&format!("{UNITS}/{}", id(&unit)?))?;
            print(out, &u, || show_unit(&u));
            Ok(())
        }
        UnitCommand::Push {
            file,
            name,
            description,
            replace,
        } => push(&client, out, &file, name, description, replace),
        UnitCommand::Rm { unit } => {
            let answer = client.delete(&format!("{UNITS}/{}", id(&unit)?))?;
            print(out, &answer, || format!("deleted unit {unit}\n"));
            Ok(())
        }
        UnitCommand::Enable { unit } => set_enabled(&client, out, &unit, "enable"),
        UnitCommand::Disable { unit } => set_enabled(&client, out, &unit, "disable"),
        UnitCommand::Versions { unit } => {
            let list = client.get(&format!("{UNITS}/{}/versions", id(&unit)?))?;
            print(out, &list, || {
                let mut t = Table::new([
                    "VERSION",
                    "CURRENT",
                    "SHA256",
                    "SIZE",
                    "ROLES",
                    "UPLOADED",
                    "BY",
                    "ROLLBACK OF",
                ]);
                for v in list.as_array().into_iter().flatten() {
                    let sha = cell(&v["module"]["sha256"]);
                    t.row(vec![
                        cell(&v["version"]),
                        if v["current"] == true {
                            "*".to_owned()
                        } else {
                            String::new()
                        },
                        sha.chars().take(12).collect(),
                        mib(&v["module"]["size_bytes"]),
                        roles(&v["exports"]),
                        cell(&v["uploaded_at"]),
                        cell(&v["uploaded_by"]),
                        cell(&v["rollback_of"]),
                    ]);
                }
                t.render()
            });
            Ok(())
        }
        UnitCommand::Rollback { unit, version } => {
            let u = client.post(
                &format!("{UNITS}/{}/rollback", id(&unit)?),
                &json!({ "version": version }),
            )?;
            print(out, &u, || {
                format!(
                    "unit {} runs version {version}'s module again ({})\n",
                    cell(&u["name"]),
                    cell(&u["module"]["sha256"])
                )
            });
            Ok(())
        }
    }
}

fn set_enabled(client: &Client, out: Format, unit: &str, verb: &str) -> Result<(), CliError> {
    let id = resolve(client, UNITS, "unit", unit)?;
    let u = client.post(&format!("{UNITS}/{id}/{verb}"), &json!({}))?;
    print(out, &u, || format!("unit {} {verb}d\n", cell(&u["name"])));
    Ok(())
}

fn show_unit(u: &Value) -> String {
    let mut text = fields(&[
        ("name", cell(&u["name"])),
        ("id", cell(&u["id"])),
        ("description", cell(&u["description"])),
        ("roles", roles(&u["exports"])),
        ("score order", cell(&u["score_order"])),
        ("enabled", cell(&u["enabled"])),
        ("built in", cell(&u["internal"])),
        (
            "module",
            format!(
                "{} ({})",
                cell(&u["module"]["sha256"]),
                mib(&u["module"]["size_bytes"])
            ),
        ),
        (
            "uploaded",
            format!("{} by {}", cell(&u["uploaded_at"]), cell(&u["uploaded_by"])),
        ),
    ]);
    let params = u["params"].as_array().cloned().unwrap_or_default();
    if !params.is_empty() {
        let mut t = Table::new(["PARAMETER", "DEFAULT", "PATTERN", "DESCRIPTION"]);
        for p in &params {
            t.row(vec![
                cell(&p["name"]),
                cell(&p["default_value"]),
                cell(&p["pattern"]),
                cell(&p["description"]),
            ]);
        }
        text.push('\n');
        text.push_str(&t.render());
    }
    text
}

/// A reader that tells, on a terminal, how much of an upload has gone.
struct Progress<R> {
    inner: R,
    sent: u64,
    total: u64,
    shown: u64,
    tty: bool,
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sent += n as u64;
        if self.tty && (self.sent >= self.shown + (1 << 20) || (n == 0 && self.shown < self.total))
        {
            self.shown = self.sent;
            eprint!(
                "\ruploading {:.1} of {:.1} MiB",
                self.sent as f64 / 1_048_576.0,
                self.total as f64 / 1_048_576.0
            );
            if self.sent >= self.total {
                eprint!("; the server is validating and compiling it...");
            }
        }
        Ok(n)
    }
}

fn push(
    client: &Client,
    out: Format,
    file: &std::path::Path,
    name: Option<String>,
    description: Option<String>,
    replace: bool,
) -> Result<(), CliError> {
    let io = |e: std::io::Error| CliError::Usage(format!("{}: {e}", file.display()));
    let opened = std::fs::File::open(file).map_err(io)?;
    let total = opened.metadata().map_err(io)?.len();
    let mut query = Vec::new();
    if let Some(name) = &name {
        query.push(format!("name={}", encode(name)));
    }
    if let Some(description) = &description {
        query.push(format!("description={}", encode(description)));
    }
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.join("&"))
    };
    let (method, path) = if replace {
        let key = name.as_deref().ok_or_else(|| {
            CliError::Usage("--replace needs --name: the unit whose module to replace".to_owned())
        })?;
        let id = resolve(client, UNITS, "unit", key)?;
        ("PUT", format!("{UNITS}/{id}/module{query}"))
    } else {
        ("POST", format!("{UNITS}{query}"))
    };
    let tty = std::io::stderr().is_terminal();
    if !tty && out == Format::Table {
        eprintln!(
            "uploading {:.1} MiB; the server validates and compiles it before answering",
            total as f64 / 1_048_576.0
        );
    }
    let started = Instant::now();
    let mut reader = Progress {
        inner: opened,
        sent: 0,
        total,
        shown: 0,
        tty,
    };
    let answer = client.call(
        method,
        &path,
        Body::Wasm {
            reader: &mut reader,
            len: total,
        },
    );
    if tty {
        eprintln!();
    }
    let u = answer?;
    print(out, &u, || {
        format!(
            "unit {} ({}) {} in {:.1} s: {}\n",
            cell(&u["name"]),
            roles(&u["exports"]),
            if replace { "replaced" } else { "stored" },
            started.elapsed().as_secs_f64(),
            cell(&u["id"])
        )
    });
    Ok(())
}

/// `text` for a URL query value: unreserved characters as they are, every
/// other byte percent-encoded.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn policy(remote: &Remote, command: PolicyCommand) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let out = remote.output;
    let policy_id = |key: &str| resolve(&client, POLICIES, "policy", key);
    let unit_ref = |key: &str| -> Result<Value, CliError> {
        Ok(json!({ "id": resolve(&client, UNITS, "unit", key)? }))
    };
    let answer = match command {
        PolicyCommand::List => {
            let list = client.get(POLICIES)?;
            print(out, &list, || {
                let mut t = Table::new([
                    "NAME",
                    "DEFAULT",
                    "LOCKED",
                    "FILTERS",
                    "WEIGHTS",
                    "BALANCE",
                    "COMBINATION",
                ]);
                for p in list.as_array().into_iter().flatten() {
                    t.row(vec![
                        cell(&p["name"]),
                        cell(&p["default_policy"]),
                        cell(&p["locked"]),
                        p["filters"].as_array().map_or(0, Vec::len).to_string(),
                        p["weights"].as_array().map_or(0, Vec::len).to_string(),
                        p["balances"][0]["scheduling_policy_unit"]["name"]
                            .as_str()
                            .unwrap_or("-")
                            .to_owned(),
                        cell(&p["combination"]),
                    ]);
                }
                t.render()
            });
            return Ok(());
        }
        PolicyCommand::Show { policy } => {
            client.get(&format!("{POLICIES}/{}", policy_id(&policy)?))?
        }
        PolicyCommand::Create {
            name,
            description,
            combination,
        } => {
            let mut body = json!({ "name": name, "description": description });
            if let Some(c) = combination {
                body["combination"] = json!(c);
            }
            client.post(POLICIES, &body)?
        }
        PolicyCommand::Clone { policy, name } => client.post(
            &format!("{POLICIES}/{}/clone", policy_id(&policy)?),
            &json!({ "name": name }),
        )?,
        PolicyCommand::Edit {
            policy,
            name,
            description,
            combination,
            default,
        } => {
            let mut body = json!({});
            if let Some(v) = name {
                body["name"] = json!(v);
            }
            if let Some(v) = description {
                body["description"] = json!(v);
            }
            if let Some(v) = combination {
                body["combination"] = json!(v);
            }
            if default {
                body["default_policy"] = json!(true);
            }
            client.put(&format!("{POLICIES}/{}", policy_id(&policy)?), &body)?
        }
        PolicyCommand::Rm { policy } => {
            client.delete(&format!("{POLICIES}/{}", policy_id(&policy)?))?;
            print(out, &Value::Null, || format!("deleted policy {policy}\n"));
            return Ok(());
        }
        PolicyCommand::AddFilter {
            policy,
            unit,
            position,
            fail_open,
            run_once,
        } => {
            let position = match position {
                FilterPosition::First => -1,
                FilterPosition::Middle => 0,
                FilterPosition::Last => 1,
            };
            let id = policy_id(&policy)?;
            client.post(
                &format!("{POLICIES}/{id}/filters"),
                &json!({
                    "scheduling_policy_unit": unit_ref(&unit)?,
                    "position": position,
                    "on_failure": if fail_open { "fail_open" } else { "fail_closed" },
                    "run_once": run_once,
                }),
            )?;
            client.get(&format!("{POLICIES}/{id}"))?
        }
        PolicyCommand::AddWeight {
            policy,
            unit,
            factor,
        } => {
            let id = policy_id(&policy)?;
            client.post(
                &format!("{POLICIES}/{id}/weights"),
                &json!({ "scheduling_policy_unit": unit_ref(&unit)?, "factor": factor }),
            )?;
            client.get(&format!("{POLICIES}/{id}"))?
        }
        PolicyCommand::SetBalance { policy, unit } => {
            let id = policy_id(&policy)?;
            let current = client.get(&format!("{POLICIES}/{id}"))?;
            for b in current["balances"].as_array().into_iter().flatten() {
                client.delete(&format!("{POLICIES}/{id}/balances/{}", cell(&b["id"])))?;
            }
            client.post(
                &format!("{POLICIES}/{id}/balances"),
                &json!({ "scheduling_policy_unit": unit_ref(&unit)? }),
            )?;
            client.get(&format!("{POLICIES}/{id}"))?
        }
        PolicyCommand::Remove { policy, unit } => {
            let id = policy_id(&policy)?;
            let unit_id = resolve(&client, UNITS, "unit", &unit)?;
            let current = client.get(&format!("{POLICIES}/{id}"))?;
            let mut removed = 0;
            for slot in ["filters", "weights", "balances"] {
                if current[slot]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|s| s["id"] == unit_id.as_str())
                {
                    client.delete(&format!("{POLICIES}/{id}/{slot}/{unit_id}"))?;
                    removed += 1;
                }
            }
            if removed == 0 {
                return Err(CliError::Api {
                    status: 404,
                    code: "not_found".to_owned(),
                    message: format!("unit `{unit}` is not in policy `{policy}`"),
                    request_id: None,
                });
            }
            client.get(&format!("{POLICIES}/{id}"))?
        }
        PolicyCommand::SetParam { policy, properties } => {
            let id = policy_id(&policy)?;
            let current = client.get(&format!("{POLICIES}/{id}"))?;
            let mut props: Vec<(String, String)> = current["properties"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| (cell(&p["name"]), cell(&p["value"])))
                .collect();
            for kv in &properties {
                let (key, value) = kv
                    .split_once('=')
                    .ok_or_else(|| CliError::Usage(format!("`{kv}`: properties are Key=Value")))?;
                props.retain(|(k, _)| k != key);
                if !value.is_empty() {
                    props.push((key.to_owned(), value.to_owned()));
                }
            }
            let props: Vec<Value> = props
                .into_iter()
                .map(|(name, value)| json!({ "name": name, "value": value }))
                .collect();
            client.put(&format!("{POLICIES}/{id}"), &json!({ "properties": props }))?
        }
    };
    print(out, &answer, || show_policy(&answer));
    Ok(())
}

fn show_policy(p: &Value) -> String {
    let mut text = fields(&[
        ("name", cell(&p["name"])),
        ("id", cell(&p["id"])),
        ("description", cell(&p["description"])),
        ("combination", cell(&p["combination"])),
        ("default", cell(&p["default_policy"])),
        ("locked", cell(&p["locked"])),
    ]);
    let mut t = Table::new(["SLOT", "UNIT", "DETAIL"]);
    for f in p["filters"].as_array().into_iter().flatten() {
        let position = match f["position"].as_i64() {
            Some(-1) => "first",
            Some(1) => "last",
            _ => "middle",
        };
        t.row(vec![
            "filter".to_owned(),
            cell(&f["scheduling_policy_unit"]["name"]),
            format!("{position}, {}", cell(&f["on_failure"])),
        ]);
    }
    for w in p["weights"].as_array().into_iter().flatten() {
        t.row(vec![
            "weight".to_owned(),
            cell(&w["scheduling_policy_unit"]["name"]),
            format!("factor {}", cell(&w["factor"])),
        ]);
    }
    for b in p["balances"].as_array().into_iter().flatten() {
        t.row(vec![
            "balance".to_owned(),
            cell(&b["scheduling_policy_unit"]["name"]),
            String::new(),
        ]);
    }
    for prop in p["properties"].as_array().into_iter().flatten() {
        t.row(vec![
            "property".to_owned(),
            cell(&prop["name"]),
            cell(&prop["value"]),
        ]);
    }
    text.push('\n');
    text.push_str(&t.render());
    text
}

pub fn cluster(remote: &Remote, command: ClusterCommand) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let out = remote.output;
    let cluster_id = |key: &str| resolve(&client, CLUSTERS, "cluster", key);
    let answer = match command {
        ClusterCommand::List => {
            let list = client.get(CLUSTERS)?;
            print(out, &list, || {
                let mut t = Table::new(["NAME", "POLICY", "BALANCE", "ID"]);
                for c in list.as_array().into_iter().flatten() {
                    let balance = if c["balance"]["enabled"] == true {
                        format!("every {} s", cell(&c["balance"]["interval_seconds"]))
                    } else {
                        "off".to_owned()
                    };
                    t.row(vec![
                        cell(&c["name"]),
                        cell(&c["scheduling_policy"]["name"]),
                        balance,
                        cell(&c["id"]),
                    ]);
                }
                t.render()
            });
            return Ok(());
        }
        ClusterCommand::Show { cluster } => {
            client.get(&format!("{CLUSTERS}/{}", cluster_id(&cluster)?))?
        }
        ClusterCommand::Create {
            name,
            policy,
            description,
        } => {
            let mut body = json!({ "name": name, "description": description });
            if let Some(p) = policy {
                body["scheduling_policy"] =
                    json!({ "id": resolve(&client, POLICIES, "policy", &p)? });
            }
            client.post(CLUSTERS, &body)?
        }
        ClusterCommand::Attach { cluster, policy } => {
            let policy = resolve(&client, POLICIES, "policy", &policy)?;
            client.put(
                &format!("{CLUSTERS}/{}", cluster_id(&cluster)?),
                &json!({ "scheduling_policy": { "id": policy } }),
            )?
        }
        ClusterCommand::Rm { cluster } => {
            client.delete(&format!("{CLUSTERS}/{}", cluster_id(&cluster)?))?;
            print(out, &Value::Null, || format!("deleted cluster {cluster}\n"));
            return Ok(());
        }
    };
    print(out, &answer, || {
        fields(&[
            ("name", cell(&answer["name"])),
            ("id", cell(&answer["id"])),
            ("description", cell(&answer["description"])),
            ("policy", cell(&answer["scheduling_policy"]["name"])),
            (
                "balance",
                format!(
                    "{} every {} s",
                    cell(&answer["balance"]["enabled"]),
                    cell(&answer["balance"]["interval_seconds"])
                ),
            ),
        ])
    });
    Ok(())
}

pub fn inventory(remote: &Remote, command: InventoryCommand) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let out = remote.output;
    let answer = match command {
        InventoryCommand::Push {
            cluster,
            file,
            generation,
        } => {
            let id = resolve(&client, CLUSTERS, "cluster", &cluster)?;
            let text = std::fs::read_to_string(&file)
                .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
            let mut body: Value = serde_json::from_str(&text)
                .map_err(|e| CliError::Usage(format!("{}: not JSON: {e}", file.display())))?;
            let generation = match (generation, body["generation"].as_u64()) {
                (Some(g), _) | (None, Some(g)) => g,
                (None, None) => match client.get(&format!("{CLUSTERS}/{id}/inventory")) {
                    Ok(held) => held["generation"].as_u64().unwrap_or(0) + 1,
                    Err(CliError::Api {
                        status: 404 | 409, ..
                    }) => 1,
                    Err(e) => return Err(e),
                },
            };
            body["generation"] = json!(generation);
            client.put(&format!("{CLUSTERS}/{id}/inventory"), &body)?
        }
        InventoryCommand::Show { cluster } => {
            let id = resolve(&client, CLUSTERS, "cluster", &cluster)?;
            client.get(&format!("{CLUSTERS}/{id}/inventory"))?
        }
    };
    print(out, &answer, || {
        fields(&[
            ("generation", cell(&answer["generation"])),
            ("snapshot generation", cell(&answer["snapshot_generation"])),
            ("hosts", cell(&answer["hosts"])),
            ("vms", cell(&answer["vms"])),
            ("claims pending", cell(&answer["claims"])),
            ("resources claimed", cell(&answer["pending"])),
        ])
    });
    Ok(())
}

pub fn schedule(remote: &Remote, args: ScheduleArgs) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let id = resolve(&client, CLUSTERS, "cluster", &args.cluster)?;
    let body = match &args.file {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
            serde_json::from_str(&text)
                .map_err(|e| CliError::Usage(format!("{}: not JSON: {e}", file.display())))?
        }
        None => {
            let mut vm = json!({ "id": args.vm_id });
            if let Some(m) = args.memory_mib {
                vm["memory_mib"] = json!(m);
            }
            if let Some(v) = args.vcpus {
                vm["vcpus"] = json!(v);
            }
            json!({ "vm": vm })
        }
    };
    let query = match (&args.policy, args.dry_run) {
        (Some(policy), _) => format!(
            "?dry_run=true&policy={}",
            resolve(&client, POLICIES, "policy", policy)?
        ),
        (None, true) => "?dry_run=true".to_owned(),
        (None, false) => String::new(),
    };
    let answer = client.post(&format!("{CLUSTERS}/{id}/schedule{query}"), &body)?;
    print(remote.output, &answer, || {
        let mut text = fields(&[
            ("decision", cell(&answer["decision_id"])),
            ("vm", cell(&answer["vm_id"])),
        ]);
        text.push_str(&super::explain::answer(&answer));
        text
    });
    Ok(())
}

/// A logged decision and the same request decided again, one after the
/// other: as it was decided, then as `args.policy` decides it now.
pub fn replay(remote: &Remote, args: ReplayArgs) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let cluster = resolve(&client, CLUSTERS, "cluster", &args.cluster)?;
    let query = match &args.policy {
        Some(policy) => format!("?policy={}", resolve(&client, POLICIES, "policy", policy)?),
        None => String::new(),
    };
    let both = client.post(
        &format!(
            "{CLUSTERS}/{cluster}/decisions/{}/replay{query}",
            encode(&args.decision)
        ),
        &json!({}),
    )?;
    print(remote.output, &both, || {
        let original = &both["original"];
        let replay = &both["replay"];
        format!(
            "== as decided (policy {}) ==\n{}\n== replayed now (policy {}, dry run) ==\n{}",
            cell(&original["answer"]["policy_id"]),
            super::explain::render(original),
            cell(&replay["policy_id"]),
            super::explain::answer(replay),
        )
    });
    Ok(())
}

pub fn explain(remote: &Remote, decision: &str, cluster: Option<&str>) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let clusters: Vec<String> = match cluster {
        Some(c) => vec![resolve(&client, CLUSTERS, "cluster", c)?],
        None => client
            .get(CLUSTERS)?
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["id"].as_str().map(str::to_owned))
            .collect(),
    };
    for c in &clusters {
        match client.get(&format!("{CLUSTERS}/{c}/decisions/{decision}")) {
            Ok(entry) => {
                print(remote.output, &entry, || super::explain::render(&entry));
                return Ok(());
            }
            Err(CliError::Api { status: 404, .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Err(CliError::Api {
        status: 404,
        code: "not_found".to_owned(),
        message: format!("no decision {decision} in the decisions log"),
        request_id: None,
    })
}

pub fn decisions(remote: &Remote, args: DecisionsArgs) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let mut query = vec![format!("limit={}", args.limit)];
    if let Some(c) = &args.cluster {
        query.push(format!(
            "cluster_id={}",
            resolve(&client, CLUSTERS, "cluster", c)?
        ));
    }
    if let Some(vm) = &args.vm {
        query.push(format!("vm_id={}", encode(vm)));
    }
    let page = client.get(&format!("/api/v1/decisions?{}", query.join("&")))?;
    print(remote.output, &page, || {
        let mut t = Table::new(["ID", "AT", "KIND", "VM", "HOST", "CLUSTER"]);
        let items = page["decisions"].as_array().or_else(|| page.as_array());
        for d in items.into_iter().flatten() {
            t.row(vec![
                cell(&d["id"]),
                cell(&d["created_at"]),
                cell(&d["kind"]),
                cell(&d["vm_id"]),
                cell(&d["host_id"]),
                cell(&d["cluster_id"]),
            ]);
        }
        t.render()
    });
    Ok(())
}

pub fn token(remote: &Remote, command: TokenCommand) -> Result<(), CliError> {
    let client = config::client(remote)?;
    let out = remote.output;
    match command {
        TokenCommand::List => {
            let list = client.get(TOKENS)?;
            print(out, &list, || {
                let mut t = Table::new(["NAME", "ROLE", "CREATED", "REVOKED", "ID"]);
                for tk in list.as_array().into_iter().flatten() {
                    t.row(vec![
                        cell(&tk["name"]),
                        cell(&tk["role"]),
                        cell(&tk["created_at"]),
                        cell(&tk["revoked_at"]),
                        cell(&tk["id"]),
                    ]);
                }
                t.render()
            });
        }
        TokenCommand::Create { name, role } => {
            let created = client.post(TOKENS, &json!({ "name": name, "role": role }))?;
            print(out, &created, || {
                format!(
                    "token {} ({}) created; its secret, shown once:\n{}\n",
                    cell(&created["name"]),
                    cell(&created["role"]),
                    cell(&created["secret"])
                )
            });
        }
        TokenCommand::Revoke { name } => {
            let id = resolve(&client, TOKENS, "token", &name)?;
            client.delete(&format!("{TOKENS}/{id}"))?;
            print(out, &Value::Null, || format!("revoked token {name}\n"));
        }
    }
    Ok(())
}

/// `sandpiper login`: checks the server and token, then saves them.
pub fn login(
    server: &str,
    token: Option<String>,
    ca_cert: Option<std::path::PathBuf>,
) -> Result<(), CliError> {
    let client = Client::new(server, token.clone(), ca_cert.as_deref())?;
    client.get(CLUSTERS)?;
    // Saved absolute: later commands run from anywhere.
    let ca_cert = ca_cert
        .map(std::path::absolute)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--ca-cert: {e}")))?;
    let path = config::save(&config::Saved {
        server: server.trim_end_matches('/').to_owned(),
        token,
        ca_cert,
    })?;
    println!("logged in to {server}; saved in {}", path.display());
    Ok(())
}
