//! The admin console (`/ui`, docs/console.md) in a real headless Chromium,
//! driven through chromedriver's WebDriver: sign in, upload a unit and see
//! it listed, see the server refuse a bad upload, build a policy in the
//! editor and see a bad property refused, attach it to a cluster, schedule,
//! open the decision's picture, replay it with another policy and try a
//! dry run, and scroll a cluster of 1,000 hosts of which only a window of
//! rows is in the page. Every step leaves a
//! screenshot in `target/console-screenshots/`.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs
//! them); without them the test fails and says so, it never skips.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::webdriver::{Element, Session};
use crate::support::{ADMIN_TOKEN, Server, builtin_wasm, distinct_copy, expect_status};

/// How long the page may take to show what a step waits for: an upload
/// compiles the unit in a child process, and the machine is shared.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Hosts of the large cluster: the size the console must stay usable at.
const LARGE_CLUSTER_HOSTS: usize = 1_000;

/// Most host rows the large cluster's table may hold in the page at once.
const MAX_RENDERED_ROWS: usize = 80;

/// The browser and the driver it runs under, stopped on drop.
struct Browser {
    driver: Child,
    session: Session,
    shots: PathBuf,
    _profile: tempfile::TempDir,
}

/// `name` on PATH, or a failure saying what to install.
fn required(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "the console's browser test needs `{name}`: install Debian's chromium and \
             chromium-driver (`apt-get install chromium chromium-driver`; .ci/run does)"
        )
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `target/console-screenshots/`, beside the profile folder holding the
/// test binary (`target/debug/deps/e2e-...`).
fn screenshot_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("create target/console-screenshots");
    dir
}

impl Browser {
    fn start() -> Browser {
        let chromium = required("chromium");
        let chromedriver = required("chromedriver");
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = tempfile::tempdir().expect("a browser profile directory");
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--window-size=1400,1000",
                    "--force-device-scale-factor=1",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let started = Instant::now();
        let session = loop {
            match Session::new(addr, capabilities.clone()) {
                Ok(session) => break session,
                Err(e) if e.error == "connection" && started.elapsed() < STEP_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("chromedriver on {addr} did not start a session: {e}"),
            }
        };
        Browser {
            driver,
            session,
            shots: screenshot_dir(),
            _profile: profile,
        }
    }

    fn goto(&self, url: &str) {
        self.session.goto(url).expect("navigate");
    }

    /// The first element matching `css`, once there is one.
    fn find(&self, css: &str) -> Element {
        let started = Instant::now();
        loop {
            if let Some(element) = self.session.find(css).expect("find") {
                return element;
            }
            assert!(
                started.elapsed() < STEP_TIMEOUT,
                "no `{css}` in the page: {}",
                self.body_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn body_text(&self) -> String {
        self.session
            .find("body")
            .ok()
            .flatten()
            .and_then(|b| self.session.text(&b).ok())
            .unwrap_or_default()
    }

    /// Clicks the element at `css`, scrolled to the middle of the view
    /// first (the policy editor's save bar sticks to the bottom).
    fn click(&self, css: &str) {
        let element = self.find(css);
        self.session
            .execute(
                "arguments[0].scrollIntoView({ block: 'center' });",
                vec![element.arg()],
            )
            .expect("scroll into view");
        self.session.click(&element).expect("click");
    }

    fn type_into(&self, css: &str, text: &str) {
        let field = self.find(css);
        self.session.clear(&field).expect("clear");
        self.session.send_keys(&field, text).expect("type");
    }

    fn choose_file(&self, css: &str, path: &str) {
        let field = self.find(css);
        self.session.send_keys(&field, path).expect("choose a file");
    }

    /// Picks the option of the `<select>` at `css` whose label is `label`,
    /// as a user would (the page hears `change`).
    fn select(&self, css: &str, label: &str) {
        let select = self.find(css);
        let started = Instant::now();
        loop {
            let picked = self
                .session
                .execute(
                    "const [s, label] = arguments;
                     const o = [...s.options].find(o => o.textContent.trim() === label);
                     if (!o) return false;
                     s.value = o.value;
                     s.dispatchEvent(new Event('change', { bubbles: true }));
                     return true;",
                    vec![select.arg(), json!(label)],
                )
                .expect("select");
            if picked == json!(true) {
                return;
            }
            assert!(
                started.elapsed() < STEP_TIMEOUT,
                "no option `{label}` in `{css}`"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the text of `css` contains `needle`, and returns it.
    fn text_with(&self, css: &str, needle: &str) -> String {
        let started = Instant::now();
        loop {
            let text = match self.session.find(css).expect("find") {
                Some(element) => self.session.text(&element).unwrap_or_default(),
                None => String::new(),
            };
            if text.contains(needle) {
                return text;
            }
            assert!(
                started.elapsed() < STEP_TIMEOUT,
                "`{css}` never said `{needle}`; it says `{text}`"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn count(&self, css: &str) -> usize {
        self.session.find_all(css).expect("find all").len()
    }

    /// The number of `css` matches once it is `expected`, or, if it never
    /// gets there within a step's time, the last one seen: a list reloading
    /// after a click still shows its old rows for a moment.
    fn count_settled(&self, css: &str, expected: usize) -> usize {
        let started = Instant::now();
        loop {
            let count = self.count(css);
            if count == expected || started.elapsed() >= STEP_TIMEOUT {
                return count;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn script(&self, js: &str) -> Value {
        self.session.execute(js, vec![]).expect("run a script")
    }

    fn screenshot(&self, name: &str) {
        // Let the last fetch and paint settle.
        std::thread::sleep(Duration::from_millis(400));
        let png = self.session.screenshot().expect("a screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).expect("save a screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.session.close();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `count` hosts named `host-0000`..., with memory and CPU in use growing
/// along the list, in the snapshot format.
fn hosts(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            let used = (i * 37 % 100) as f64;
            json!({
                "id": format!("host-{i:04}"),
                "address": format!("host-{i:04}.example.com"),
                "metrics": {
                    "cpu_sockets": 2, "cpu_cores": 16, "cpu_threads": 32,
                    "cpu_usage_percent": (used * 0.8).min(95.0),
                    "cpu_overloaded_minutes": 0,
                    "memory_total_mib": 65536,
                    "memory_free_mib": 65536.0 - used * 600.0,
                    "memory_committed_mib": used * 600.0,
                    "disk_total_gib": 1000, "disk_free_gib": 800,
                    "vm_count": i % 20, "vcpus_used": (i % 20) * 2,
                },
            })
        })
        .collect()
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a file to upload");
    path.display().to_string()
}

#[test]
fn the_console_signs_in_edits_a_policy_and_pictures_a_decision() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let base = format!("http://{}/ui", server.addr);
    let browser = Browser::start();

    // Served by the server itself, with a strict content security policy.
    let page = server.client(None).get("/ui");
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let missing = server.client(None).get("/ui/no-such-file.js");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["code"], "not_found");

    // 1. Sign in: a wrong token is refused, the admin token lets us in.
    browser.goto(&base);
    browser.type_into("#token", "not-a-token");
    browser.click("#signin-submit");
    browser.text_with("#signin-error", "token");
    browser.screenshot("01-sign-in");
    browser.type_into("#token", ADMIN_TOKEN);
    browser.click("#signin-submit");
    browser.text_with("#units-table", "Memory");

    // 2. Upload a unit (the built-in Memory filter, built from source,
    //    as new bytes under a name of ours) and see it listed.
    let memory = distinct_copy(builtin_wasm("memory"), "console");
    let good = write_file(dir.path(), "console-memory.wasm", &memory);
    browser.type_into("#unit-name", "ConsoleMemory");
    browser.choose_file("#unit-file", &good);
    browser.click("#unit-upload");
    let row = browser.text_with("tr[data-name='ConsoleMemory']", "filter");
    assert!(row.contains("KiB"), "size shown: {row}");
    assert!(row.contains("Rust"), "language shown: {row}");
    browser.text_with("#upload-status", "Uploaded");
    browser.screenshot("02-units");
    browser.click("tr[data-name='ConsoleMemory'] button[data-versions]");
    browser.text_with("#unit-versions", "current");

    // 3. A file that is not WebAssembly: the server's error is shown.
    let bad = write_file(dir.path(), "broken.wasm", b"this is not a component");
    browser.type_into("#unit-name", "Broken");
    browser.choose_file("#unit-file", &bad);
    browser.click("#unit-upload");
    browser.text_with("#upload-error", "module_not_wasm");
    browser.screenshot("03-upload-refused");

    // 4. A built-in policy is read-only; build one in the editor.
    browser.goto(&format!("{base}#/policies"));
    browser.click("tr[data-name='evenly_distributed'] a");
    browser.text_with("main", "read-only");
    let locked = browser.script(
        "return [document.querySelector('#policy-save').hidden,
                 [...document.querySelectorAll('#properties input')].every(i => i.disabled),
                 [...document.querySelectorAll('button[data-add-filter]')].every(b => b.disabled)];",
    );
    assert_eq!(
        locked,
        json!([true, true, true]),
        "a locked policy's editor is read-only"
    );
    browser.goto(&format!("{base}#/policies"));
    browser.type_into("#new-policy-name", "console-policy");
    browser.click("#new-policy-create");
    browser.click("button[data-add-filter='ConsoleMemory']");
    browser.select("select[data-position='ConsoleMemory']", "First");
    browser.click("button[data-add-filter='CPU']");
    browser.click("button[data-add-weight='OptimalForMemoryEvenDistribution']");
    browser.type_into("input[data-factor='OptimalForMemoryEvenDistribution']", "3");
    browser.click("button[data-add-weight='OptimalForCpuEvenDistribution']");
    browser.type_into("input[data-factor='OptimalForCpuEvenDistribution']", "2");
    browser.select("#balancer", "OptimalForEvenDistribution");
    // A value the unit's regex refuses, as it is typed...
    browser.type_into("input[data-property='MaxMemoryOverCommit']", "50");
    browser.text_with("#property-error-MaxMemoryOverCommit", "does not match");
    browser.screenshot("04-policy-bad-property");
    // ... and by the server when it is saved anyway.
    browser.click("#policy-save");
    browser.text_with("#policy-error", "invalid_parameter_value");
    browser.type_into("input[data-property='MaxMemoryOverCommit']", "150");
    browser.click("#policy-save");
    browser.text_with("#policy-status", "Saved");
    browser.script("window.scrollTo(0, 0);");
    browser.screenshot("05-policy-editor");

    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies"), 200);
    let policy = policies
        .as_array()
        .expect("a list")
        .iter()
        .find(|p| p["name"] == "console-policy")
        .expect("the policy was saved")
        .clone();
    assert_eq!(policy["filters"].as_array().map(Vec::len), Some(2));
    let console_filter = policy["filters"]
        .as_array()
        .expect("filters")
        .iter()
        .find(|f| f["scheduling_policy_unit"]["name"] == "ConsoleMemory")
        .expect("ConsoleMemory is a filter");
    assert_eq!(console_filter["position"], -1);
    let factors: Vec<(&str, &Value)> = policy["weights"]
        .as_array()
        .expect("weights")
        .iter()
        .map(|w| {
            (
                w["scheduling_policy_unit"]["name"]
                    .as_str()
                    .expect("a name"),
                &w["factor"],
            )
        })
        .collect();
    assert_eq!(
        factors,
        [
            ("OptimalForMemoryEvenDistribution", &json!(3)),
            ("OptimalForCpuEvenDistribution", &json!(2))
        ]
    );
    assert_eq!(
        policy["balances"][0]["scheduling_policy_unit"]["name"],
        "OptimalForEvenDistribution"
    );
    assert_eq!(
        policy["properties"],
        json!([{ "name": "MaxMemoryOverCommit", "value": "150" }])
    );

    // 5. Attach it to a cluster in the cluster page.
    let none_policy = policies
        .as_array()
        .expect("a list")
        .iter()
        .find(|p| p["default_policy"] == true)
        .expect("a default policy")["id"]
        .clone();
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "console-cluster", "scheduling_policy": { "id": none_policy } }),
        ),
        201,
    );
    let cluster_id = cluster["id"].as_str().expect("id").to_owned();
    browser.goto(&format!("{base}#/clusters/{cluster_id}"));
    browser.select("#cluster-policy", "console-policy");
    browser.text_with("#hosts-table", "has not sent an inventory");
    browser.click("#cluster-attach");
    browser.text_with("#cluster-status", "console-policy");
    let attached = expect_status(&admin.get(&format!("/api/v1/clusters/{cluster_id}")), 200);
    assert_eq!(attached["scheduling_policy"]["id"], policy["id"]);

    // 6. Schedule as an engine would: a held inventory, then a decision
    //    over hosts sent inline (whose answer keeps the whole cost table).
    let small = hosts(12);
    expect_status(
        &admin.put(
            &format!("/api/v1/clusters/{cluster_id}/inventory"),
            &json!({ "generation": 1, "hosts": small }),
        ),
        200,
    );
    expect_status(
        &admin.post(
            &format!("/api/v1/clusters/{cluster_id}/schedule"),
            &json!({ "vm": { "id": "held-vm", "memory_mib": 4096, "vcpus": 2 } }),
        ),
        200,
    );
    let decided = expect_status(
        &admin.post(
            &format!("/api/v1/clusters/{cluster_id}/schedule"),
            &json!({ "vm": { "id": "big-vm", "memory_mib": 40000, "vcpus": 2 }, "hosts": small }),
        ),
        200,
    );
    let decision_id = decided["decision_id"].as_str().expect("a decision id");
    let winner = decided["chosen_host"].as_str().expect("a winner");

    // 7. The decisions log, then the decision's picture.
    browser.goto(&format!("{base}#/decisions"));
    browser.text_with("#decisions-table", "big-vm");
    browser.screenshot("06-decisions");
    browser.type_into("#filter-vm", "held-vm");
    browser.click("#decisions-filter");
    // The unfiltered list already shows `held-vm`: wait for the rows to
    // settle rather than for the text.
    assert_eq!(
        browser.count_settled("#decisions-table tbody tr", 1),
        1,
        "filtered by VM"
    );
    browser.script("document.querySelector('#filter-vm').value = '';");
    browser.click("#decisions-filter");
    browser.text_with("#decisions-table", "big-vm");
    browser.click(&format!("a[data-decision='{decision_id}']"));
    browser.text_with("#funnel-figure", "ConsoleMemory");
    browser.text_with("#funnel-figure", "MiB");
    browser.text_with("#winner", winner);
    assert!(
        browser.count("#heatmap rect.cell") >= 2,
        "the heat map has a cell per weight and host"
    );
    browser.text_with("#heatmap-figure", "OptimalForMemoryEvenDistribution");
    browser.screenshot("07-decision-explain");
    browser.script("document.querySelector('#heatmap-figure').scrollIntoView();");
    browser.screenshot("08-decision-heat-map");

    // 8. What if: the held decision replayed with another policy, beside
    //    the original; then a dry run with any policy on the cluster page.
    let held = expect_status(&admin.get("/api/v1/decisions?vm_id=held-vm&limit=1"), 200);
    let held_id = held["decisions"][0]["id"]
        .as_str()
        .expect("the held decision");
    browser.goto(&format!("{base}#/decisions/{cluster_id}/{held_id}"));
    browser.select("#replay-policy", "none");
    browser.click("#replay-run");
    browser.text_with("#replay", "Replay now");
    browser.text_with("#replay", "Original");
    browser.find("#replay-funnel-figure");
    browser.screenshot("09-decision-replay");
    browser.goto(&format!("{base}#/clusters/{cluster_id}"));
    browser.type_into("#whatif-memory", "40000");
    browser.click("#whatif-run");
    browser.text_with("#whatif-status", "would place");
    browser.text_with("#whatif-funnel-figure", "ConsoleMemory");
    assert!(browser.count("#whatif-heatmap rect.cell") >= 2);
    // The same question again: the per-host Memory filter's verdicts come
    // from the first asking, and the funnel says so.
    browser.click("#whatif-run");
    browser.text_with("#whatif-funnel-figure", "reused from earlier decisions");
    browser.script("document.querySelector('#whatif-title').scrollIntoView();");
    browser.screenshot("10-cluster-what-if");

    // 9. The simulator: a generated workload replayed against two
    //    policies on a copy of the cluster; the report drawn from its JSON.
    //    A size mix the page cannot read, and a request the server refuses
    //    (no policy chosen), are both shown.
    browser.goto(&format!("{base}#/simulator"));
    browser.select("#sim-cluster", "console-cluster");
    browser.type_into("#sim-arrivals", "60");
    browser.type_into("#sim-sizes", "lots of memory");
    browser.click("#sim-run");
    browser.text_with("#sim-error", "size mix");
    browser.type_into("#sim-sizes", "2048x1:3, 4096x2");
    browser.script(
        "document.querySelectorAll('#sim-policies input').forEach(c => { c.checked = false; });",
    );
    browser.click("#sim-run");
    browser.text_with("#sim-error", "policies");
    browser.script(
        "document.querySelectorAll('#sim-policies input').forEach(c => {
           c.checked = ['evenly_distributed', 'power_saving'].includes(c.dataset.name); });",
    );
    browser.click("#sim-run");
    browser.text_with("#sim-status", "Simulated");
    browser.text_with("#sim-table", "power_saving");
    browser.text_with("#sim-table", "evenly_distributed");
    assert_eq!(browser.count("#sim-table tbody tr"), 2, "a row per policy");
    assert_eq!(
        browser.count("#sim-memory-chart polyline"),
        2,
        "a line per policy"
    );
    assert!(browser.count("#sim-hosts-chart rect") >= 2);
    let before = expect_status(
        &admin.get(&format!("/api/v1/clusters/{cluster_id}/claims")),
        200,
    );
    assert_eq!(
        before["claims"].as_array().map(Vec::len),
        Some(1),
        "the simulation left the cluster's claims as they were: {before}"
    );
    browser.screenshot("13-simulator");
    browser.script("document.querySelector('#sim-memory-chart').scrollIntoView();");
    browser.screenshot("14-simulator-charts");

    // 10. A cluster of 1,000 hosts: only a window of rows is in the page,
    //    and scrolling brings the last hosts in.
    let large = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "large", "scheduling_policy": { "id": policy["id"] } }),
        ),
        201,
    );
    let large_id = large["id"].as_str().expect("id").to_owned();
    expect_status(
        &admin.put(
            &format!("/api/v1/clusters/{large_id}/inventory"),
            &json!({ "generation": 1, "hosts": hosts(LARGE_CLUSTER_HOSTS) }),
        ),
        200,
    );
    for i in 0..5 {
        expect_status(
            &admin.post(
                &format!("/api/v1/clusters/{large_id}/schedule"),
                &json!({ "vm": { "id": format!("pending-{i}"), "memory_mib": 8192, "vcpus": 4 } }),
            ),
            200,
        );
    }
    browser.goto(&format!("{base}#/clusters/{large_id}"));
    browser.text_with("#hosts-table", "host-0000");
    browser.text_with("#hosts-summary", "1000");
    browser.screenshot("11-cluster-hosts");
    let rendered = browser.count("#hosts-table .vrow");
    assert!(
        (1..=MAX_RENDERED_ROWS).contains(&rendered),
        "{rendered} host rows in the page for {LARGE_CLUSTER_HOSTS} hosts"
    );
    browser
        .script("const s = document.querySelector('#hosts-scroll'); s.scrollTop = s.scrollHeight;");
    browser.text_with("#hosts-table", "host-0999");
    let rendered = browser.count("#hosts-table .vrow");
    assert!(
        rendered <= MAX_RENDERED_ROWS,
        "{rendered} host rows after scrolling"
    );
    browser.screenshot("12-cluster-hosts-scrolled");

    // 11. Signing out forgets the token; a page then asks for it again.
    browser.click("#signout");
    browser.find("#token");
}
