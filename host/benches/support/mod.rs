//! What the benchmarks share: for those that drive the real `sandpiper`
//! binary, the server process and a keep-alive JSON client; for those that
//! decide in process, a built-in policy composed from units. Included with
//! `mod support;` by each bench that uses it; a bench may not use every
//! item.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// How long the server may take to start (compiling built-in units).
pub const START_TIMEOUT: Duration = Duration::from_secs(300);
/// The admin token the bench server starts with.
pub const TOKEN: &str = "bench-admin-0123456789abcdef0123456789abcdef";

/// The server under test: the real binary.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Starts `sandpiper serve` on `db` with the admin token [`TOKEN`],
    /// warnings-only logs, the extra flags `args` and environment `env`,
    /// and returns once it listens (it prints "listening on" only when
    /// every unit is loaded).
    pub fn start(db: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Server> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sandpiper"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(db)
            .args(args)
            .env("SANDPIPER_ADMIN_TOKEN", TOKEN)
            .env("SANDPIPER_LOG", "warn");
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting sandpiper")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.trim().to_owned());
                }
            }
        });
        let addr = rx
            .recv_timeout(START_TIMEOUT)
            .context("the server did not start")?
            .parse()
            .context("listening address")?;
        Ok(Server { child, addr })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits for the process to exit.
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// A keep-alive HTTP/1.1 client, with the admin token or another or none.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    addr: SocketAddr,
    token: Option<&'static str>,
}

impl Client {
    /// A client with the admin token [`TOKEN`].
    pub fn connect(addr: SocketAddr) -> anyhow::Result<Client> {
        Client::connect_as(addr, Some(TOKEN))
    }

    /// A client sending `token` (none: no `Authorization` header).
    pub fn connect_as(addr: SocketAddr, token: Option<&'static str>) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).context("connecting")?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        Ok(Client {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            addr,
            token,
        })
    }

    pub fn get(&mut self, path: &str) -> anyhow::Result<Value> {
        self.json("GET", path, None)
    }

    pub fn send(&mut self, method: &str, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.json(method, path, Some(body))
    }

    /// A JSON request; an answer outside 2xx is an error.
    pub fn json(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let body = body
            .map(serde_json::to_vec)
            .transpose()?
            .unwrap_or_default();
        let (code, bytes) = self.raw(method, path, "application/json", body)?;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        if !(200..300).contains(&code) {
            bail!("{method} {path}: {code} {value}");
        }
        Ok(value)
    }

    /// One request: the status and the body.
    pub fn raw(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> anyhow::Result<(u16, Vec<u8>)> {
        let auth = self
            .token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Type: {content_type}\r\n\
             Content-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        self.writer.write_all(head.as_bytes())?;
        self.writer.write_all(&body)?;
        let mut status = String::new();
        self.reader.read_line(&mut status)?;
        let code: u16 = status
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("status line {status:?}"))?;
        let mut length = None;
        let mut chunked = false;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = Some(v.trim().parse::<usize>()?);
                } else if k.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = v.trim().eq_ignore_ascii_case("chunked");
                }
            }
        }
        let mut bytes = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                self.reader.read_line(&mut size)?;
                let size = usize::from_str_radix(size.trim(), 16)?;
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                bytes.extend_from_slice(&chunk[..size]);
            }
        } else {
            bytes.resize(length.context("no content-length")?, 0);
            self.reader.read_exact(&mut bytes)?;
        }
        Ok((code, bytes))
    }
}

/// Milliseconds, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Physical memory of host `i`, MiB: 64 to 512 GiB.
pub fn total_memory(i: usize) -> f64 {
    65536.0 * (1 + i % 8) as f64
}

/// Free memory of host `i` in report `round`, MiB: 30 to 80 % of its memory.
pub fn free_memory(i: usize, round: usize) -> f64 {
    let total = total_memory(i);
    (total * (0.3 + 0.5 * ((i * 7919 + round * 13) % 100) as f64 / 100.0)).floor()
}

/// Host `i` of a synthetic oVirt-like cluster as reported in `round`: the
/// hosts `http_schedule` and `startup` hold.
pub fn host(i: usize, round: usize) -> Value {
    let total = total_memory(i);
    let free = free_memory(i, round);
    json!({
        "id": format!("host-{i:05}"),
        "metrics": {
            "memory_total_mib": total,
            "memory_free_mib": free,
            "memory_committed_mib": total - free,
            "cpu_sockets": 2,
            "cpu_cores": 16 * (1 + i % 4),
            "cpu_threads": 32 * (1 + i % 4),
            "cpu_usage_percent": (i % 90) as f64,
            "vm_count": (i % 20) as f64,
        },
        "networks": ["ovirtmgmt"],
    })
}

/// Creates a policy through the API: `body` (its name, combination, ...),
/// then the built-in units named in `filters`, in order, and the
/// `weights` with their factors. Its id.
pub fn create_policy(
    addr: SocketAddr,
    body: &Value,
    filters: &[&str],
    weights: &[(&str, u32)],
) -> anyhow::Result<String> {
    let mut admin = Client::connect(addr)?;
    let units = admin.get("/api/v1/schedulingpolicyunits")?;
    let unit = |name: &str| -> anyhow::Result<String> {
        units
            .as_array()
            .and_then(|all| all.iter().find(|u| u["name"] == name))
            .and_then(|u| u["id"].as_str())
            .map(str::to_owned)
            .with_context(|| format!("unit {name}"))
    };
    let policy = admin.send("POST", "/api/v1/schedulingpolicies", body)?;
    let id = policy["id"].as_str().context("policy id")?.to_owned();
    let base = format!("/api/v1/schedulingpolicies/{id}");
    for name in filters {
        admin.send(
            "POST",
            &format!("{base}/filters"),
            &json!({ "scheduling_policy_unit": { "id": unit(name)? } }),
        )?;
    }
    for (name, factor) in weights {
        admin.send(
            "POST",
            &format!("{base}/weights"),
            &json!({ "scheduling_policy_unit": { "id": unit(name)? }, "factor": factor }),
        )?;
    }
    let check = admin.get(&base)?;
    if check["filters"].as_array().map(Vec::len) != Some(filters.len()) {
        bail!("the policy has the wrong filters: {check}");
    }
    Ok(id)
}

/// The one-minute load average, printed beside figures: these machines are
/// shared and noisy.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// CPU time process `pid` has used so far, all its threads, user and
/// system: `/proc/<pid>/stat`'s `utime` and `stime`, in the kernel's
/// `USER_HZ` ticks (100 a second on x86-64 and arm64, as `getconf
/// CLK_TCK` says; the benchmarks run on nothing else).
pub fn process_cpu(pid: u32) -> anyhow::Result<Duration> {
    const USER_HZ: u64 = 100;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name, in parentheses, may hold spaces: count fields
    // from after its closing one (field 3, the state, comes first).
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("/proc/<pid>/stat has no command name")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(i)
            .context("/proc/<pid>/stat is short")?
            .parse()?)
    };
    // utime and stime are fields 14 and 15; `after` starts at field 3.
    let total = ticks(14 - 3)? + ticks(15 - 3)?;
    Ok(Duration::from_millis(total * 1000 / USER_HZ))
}

/// Context switches of process `pid`'s threads alive now, voluntary (a
/// thread went to sleep: waiting for work, a lock, I/O) and not (it was
/// preempted), from each `/proc/<pid>/task/*/status`. A thread that ended
/// takes its count with it, so compare two reads over a span in which the
/// server's threads live on.
pub fn process_switches(pid: u32) -> anyhow::Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        // A thread may end between the listing and the read.
        let Ok(status) = std::fs::read_to_string(task?.path().join("status")) else {
            continue;
        };
        for line in status.lines() {
            if let Some(count) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += count.trim().parse::<u64>()?;
            }
        }
    }
    Ok(total)
}

/// The middle of `values` (the upper one of an even count); NaN for none.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The built-in default policy (`none`) as written.
pub fn default_policy_spec() -> anyhow::Result<sandpiper::builtin::BuiltinPolicy> {
    sandpiper::builtin::BuiltinPolicy::all()
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .find(|p| p.default)
        .context("no built-in policy is the default")
}

/// The built-in policy `spec` with its units taken by name from `units`
/// (embedded components or the same units compiled natively), as the
/// server builds it.
pub fn compose(
    spec: &sandpiper::builtin::BuiltinPolicy,
    units: &std::collections::HashMap<String, std::sync::Arc<dyn sandpiper::unit::Unit>>,
) -> anyhow::Result<sandpiper::pipeline::Policy> {
    let unit = |name: &str| {
        units
            .get(name)
            .cloned()
            .with_context(|| format!("policy {}: no unit `{name}`", spec.name))
    };
    let mut builder = sandpiper::pipeline::Policy::builder()
        .combination(spec.mode)
        .params(spec.properties.clone());
    for filter in &spec.filters {
        builder = builder.filter_with(
            unit(&filter.unit)?,
            filter.position,
            sandpiper::pipeline::OnFailure::FailClosed,
        );
    }
    for weight in &spec.weights {
        builder = builder.score(unit(&weight.unit)?, weight.factor);
    }
    builder
        .build()
        .with_context(|| format!("building policy {}", spec.name))
}
