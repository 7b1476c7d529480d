//! `sandpiper unit new`: writes a ready policy unit project, as `spin new`
//! does for Spin apps: the source in the chosen language implementing the
//! chosen roles, a `build.sh`, a README, and a fixture (`cases.json`) that
//! `sandpiper unit test` passes against the unit as generated.
//!
//! Every template implements the same small policy (keep `MinFreeMib` of
//! memory free on hosts) so the fixture is one for all languages. The
//! templates live in `host/templates/unit/`, one file per generated file,
//! with `{{#role}}`…`{{/role}}` lines around what only some projects get
//! and `{{key}}` placeholders; [`render`] is all the template engine they
//! need.
//!
//! The projects build against the Sandpiper source tree this binary was
//! built from (or `--sdk`): the Rust SDK is not on crates.io, and the other
//! languages' builds need the tree's WIT, helper layers and
//! `scripts/build-unit.sh`. A project records that path once, in its build
//! files; `SANDPIPER_SRC` overrides it at build time.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::cli::output::Format;
use crate::unit::{Exports, Role};

/// The arguments of `sandpiper unit new`.
#[derive(Debug, Args)]
pub struct UnitNewArgs {
    /// The unit's name. It is also the directory's, and the crate's or
    /// module's, so: a letter, then letters, digits, `-` or `_` (64 at
    /// most).
    pub name: String,
    /// The language to write it in.
    #[arg(long, value_enum)]
    pub lang: Language,
    /// The roles it implements, comma-separated (`filter,score`).
    #[arg(long, value_enum, value_delimiter = ',', required = true)]
    pub roles: Vec<Role>,
    /// Where to write the project; must not exist, or be empty [default:
    /// ./NAME].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The Sandpiper source tree the project builds against (its Rust SDK,
    /// WIT, helper layers and scripts/build-unit.sh) [default: the tree
    /// this binary was built from].
    #[arg(long, env = "SANDPIPER_SRC")]
    pub sdk: Option<PathBuf>,
}

/// The languages a project can be generated in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Language {
    Rust,
    Python,
    Js,
    C,
}

impl Language {
    /// The name `--lang` and `scripts/build-unit.sh` take; also a template
    /// section, so the README can say language-specific things.
    fn key(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::Js => "js",
            Language::C => "c",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Language::Rust => "Rust",
            Language::Python => "Python",
            Language::Js => "JavaScript",
            Language::C => "C",
        }
    }
}

/// Why no project was written.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    #[error(
        "invalid unit name {0:?}: it is also a directory and a crate or module name, so it \
         must start with a letter and hold only letters, digits, `-` and `_` (64 at most)"
    )]
    Name(String),
    #[error(
        "the C helper layer does not cover the balance role yet; write a balancing unit in \
         rust, python or js"
    )]
    CBalance,
    #[error("{0} already exists and is not empty; choose another name or --dir")]
    Exists(PathBuf),
    #[error(
        "{0} is not a Sandpiper source tree (no scripts/build-unit.sh and guest-sdk/); pass \
         --sdk with the path of a checkout"
    )]
    NoSdk(PathBuf),
    #[error(
        "the Sandpiper source tree's path {0} holds a quote, backslash, `$` or control \
         character, which the generated build files cannot carry"
    )]
    SdkPath(PathBuf),
    #[error("could not write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Exit status when the project was written.
const EXIT_WRITTEN: u8 = 0;
/// Exit status when it was not (the message says why).
const EXIT_ERROR: u8 = 2;

/// Runs `sandpiper unit new`: writes the project and says what to do next,
/// as text or (`-o json`) as one JSON document: the directory, the files
/// written and the next commands.
pub fn main(args: &UnitNewArgs, format: Format) -> ExitCode {
    match write(args) {
        Ok((dir, files)) => {
            let name = &args.name;
            let next = [
                format!("cd {}", dir.display()),
                "./build.sh".to_owned(),
                format!("sandpiper unit test build/{name}.wasm cases.json"),
                format!("sandpiper unit push build/{name}.wasm"),
            ];
            match format {
                Format::Table => {
                    println!("wrote {}", dir.display());
                    println!("next:");
                    for command in &next {
                        println!("  {command}");
                    }
                }
                Format::Json => {
                    let paths: Vec<String> =
                        files.iter().map(|f| f.path.display().to_string()).collect();
                    let report = json!({
                        "dir": dir.display().to_string(),
                        "files": paths,
                        "next": next,
                    });
                    println!("{report:#}");
                }
            }
            ExitCode::from(EXIT_WRITTEN)
        }
        Err(error) => {
            eprintln!("sandpiper: {error}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Writes the project `args` asks for; its directory and files.
pub fn write(args: &UnitNewArgs) -> Result<(PathBuf, Vec<ProjectFile>), NewError> {
    let sdk = match &args.sdk {
        Some(sdk) => sdk.clone(),
        None => default_sdk(),
    };
    let files = project(&args.name, args.lang, &args.roles, &sdk)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    let occupied = std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied || dir.is_file() {
        return Err(NewError::Exists(dir));
    }
    for file in &files {
        let path = dir.join(&file.path);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &file.contents))
            .and_then(|()| make_executable(&path, file.executable));
        written.map_err(|source| NewError::Write { path, source })?;
    }
    Ok((dir, files))
}

/// One file of a project, relative to its directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectFile {
    pub path: PathBuf,
    pub contents: String,
    pub executable: bool,
}

/// The files of a project, without touching the disk (but for checking
/// that `sdk` is a source tree).
pub fn project(
    name: &str,
    lang: Language,
    roles: &[Role],
    sdk: &Path,
) -> Result<Vec<ProjectFile>, NewError> {
    check_name(name)?;
    let exports = Exports {
        filter: roles.contains(&Role::Filter),
        score: roles.contains(&Role::Score),
        balance: roles.contains(&Role::Balance),
    };
    if lang == Language::C && exports.balance {
        return Err(NewError::CBalance);
    }
    if !sdk.join("scripts/build-unit.sh").is_file() || !sdk.join("guest-sdk").is_dir() {
        return Err(NewError::NoSdk(sdk.to_owned()));
    }
    let sdk = std::path::absolute(sdk).unwrap_or_else(|_| sdk.to_owned());
    let sdk_text = sdk.to_string_lossy().into_owned();
    if sdk_text
        .chars()
        .any(|c| matches!(c, '"' | '\'' | '\\' | '$' | '`') || c.is_control())
    {
        return Err(NewError::SdkPath(sdk));
    }

    let role_names: Vec<String> = exports.roles().iter().map(Role::to_string).collect();
    let crate_name = crate_name(name);
    let lib = crate_name.replace('-', "_");
    let type_name = type_name(name);
    let roles_text = role_names.join(", ");
    let vars = [
        ("name", name),
        ("type", type_name.as_str()),
        ("crate", crate_name.as_str()),
        ("lib", lib.as_str()),
        ("world", world(exports)),
        ("roles", roles_text.as_str()),
        ("roles_text", roles_text.as_str()),
        ("language", lang.title()),
        ("sdk", sdk_text.as_str()),
    ];
    let mut sections: BTreeSet<&str> = role_names.iter().map(String::as_str).collect();
    sections.insert(lang.key());

    let file = |path: &str, template: &str, executable: bool| ProjectFile {
        path: PathBuf::from(path),
        contents: render(template, &sections, &vars),
        executable,
    };
    let mut files = vec![
        file(
            "README.md",
            include_str!("../templates/unit/README.md"),
            false,
        ),
        file(
            ".gitignore",
            include_str!("../templates/unit/gitignore"),
            false,
        ),
        ProjectFile {
            path: PathBuf::from("cases.json"),
            contents: fixture(name, exports),
            executable: false,
        },
    ];
    match lang {
        Language::Rust => files.extend([
            file(
                "Cargo.toml",
                include_str!("../templates/unit/rust/Cargo.toml"),
                false,
            ),
            file(
                "src/lib.rs",
                include_str!("../templates/unit/rust/lib.rs"),
                false,
            ),
            file(
                "build.sh",
                include_str!("../templates/unit/rust/build.sh"),
                true,
            ),
            // The compiler the SDK is built and tested with.
            file(
                "rust-toolchain.toml",
                include_str!("../../rust-toolchain.toml"),
                false,
            ),
        ]),
        Language::Python => files.extend([
            file(
                "app.py",
                include_str!("../templates/unit/python/app.py"),
                false,
            ),
            file(
                "build.sh",
                include_str!("../templates/unit/python/build.sh"),
                true,
            ),
        ]),
        Language::Js => files.extend([
            file(
                "unit.js",
                include_str!("../templates/unit/js/unit.js"),
                false,
            ),
            file(
                "build.sh",
                include_str!("../templates/unit/js/build.sh"),
                true,
            ),
            // componentize-js only lets a module import files under its
            // own directory.
            file(
                "sandpiper.js",
                include_str!("../../guest-sdk/js/sandpiper.js"),
                false,
            ),
        ]),
        Language::C => files.extend([
            file("unit.c", include_str!("../templates/unit/c/unit.c"), false),
            file(
                "build.sh",
                include_str!("../templates/unit/c/build.sh"),
                true,
            ),
        ]),
    }
    Ok(files)
}

/// The source tree this binary was built from.
fn default_sdk() -> PathBuf {
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    host.parent().unwrap_or(host).to_owned()
}

fn check_name(name: &str) -> Result<(), NewError> {
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if starts_with_letter && rest_ok && name.len() <= 64 {
        Ok(())
    } else {
        Err(NewError::Name(name.to_owned()))
    }
}

/// `MemoryHeadroom` and `memory_headroom` become `memory-headroom`.
fn crate_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous: Option<char> = None;
    for c in name.chars() {
        let word_starts = c.is_ascii_uppercase()
            && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit());
        if word_starts {
            out.push('-');
        }
        out.push(if c == '_' {
            '-'
        } else {
            c.to_ascii_lowercase()
        });
        previous = Some(c);
    }
    out
}

/// `memory-headroom` becomes `MemoryHeadroomUnit`: an UpperCamelCase type
/// that cannot clash with the SDK prelude's `Filter`, `Score`, `Unit`...
fn type_name(name: &str) -> String {
    let mut camel: String = name
        .split(['-', '_'])
        .filter(|word| !word.is_empty())
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    if !camel.ends_with("Unit") || camel == "Unit" {
        camel.push_str("Unit");
    }
    camel
}

/// The world of `wit/policy.wit` that exports exactly these roles.
fn world(exports: Exports) -> &'static str {
    match (exports.filter, exports.score, exports.balance) {
        (true, false, false) => "filter-unit",
        (false, true, false) => "score-unit",
        (false, false, true) => "balance-unit",
        (true, true, false) => "filter-score-unit",
        (true, false, true) => "filter-balance-unit",
        (false, true, true) => "score-balance-unit",
        // `--roles` is required, so never none; all three is `full-unit`.
        _ => "full-unit",
    }
}

/// Keeps the lines of `template` whose sections are all in `sections`
/// (section lines are exactly `{{#name}}` and `{{/name}}`, and nest), then
/// replaces each `{{key}}` with its value.
pub fn render(template: &str, sections: &BTreeSet<&str>, vars: &[(&str, &str)]) -> String {
    let mut open: Vec<&str> = Vec::new();
    let mut out = String::with_capacity(template.len());
    for line in template.lines() {
        let marker = line.trim();
        if let Some(section) = marker
            .strip_prefix("{{#")
            .and_then(|s| s.strip_suffix("}}"))
        {
            open.push(section);
        } else if marker.starts_with("{{/") && marker.ends_with("}}") {
            open.pop();
        } else if open.iter().all(|section| sections.contains(section)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}

/// The fixture every generated unit passes as generated: three hosts (one
/// short of memory, running a VM), and a case per role.
fn fixture(name: &str, exports: Exports) -> String {
    let mut cases = Vec::new();
    let two_gib = json!({ "id": "new-vm", "memory_mib": 2048, "vcpus": 2 });
    if exports.filter || exports.score {
        let mut expect = serde_json::Map::new();
        if exports.filter {
            expect.insert(
                "rejected".into(),
                json!({
                    "h2": "would leave less than 1024 MiB free",
                    "h3": "would leave less than 1024 MiB free"
                }),
            );
        }
        if exports.score {
            expect.insert(
                "scores".into(),
                json!({ "h1": 6144, "h2": 512, "h3": -1280 }),
            );
        }
        cases.push(json!({
            "name": "a 2 GiB VM with the default MinFreeMib (1024)",
            "vm": two_gib,
            "expect": expect,
        }));
    }
    if exports.filter {
        cases.push(json!({
            "name": "MinFreeMib 256 lets h2 through",
            "vm": two_gib,
            "params": { "MinFreeMib": "256" },
            "expect": { "rejected": { "h3": "would leave less than 256 MiB free" } },
        }));
    }
    if exports.balance {
        cases.push(json!({
            "name": "h3 keeps less than MinFreeMib: its VM may move to h1 or h2",
            "expect": { "migration": { "vm": "vm-a", "destinations": ["h1", "h2"] } },
        }));
        cases.push(json!({
            "name": "MinFreeMib 512: every host keeps enough, nothing moves",
            "params": { "MinFreeMib": "512" },
            "expect": { "migration": Value::Null },
        }));
    }
    let fixture = json!({
        "description": format!(
            "{name} as generated by `sandpiper unit new`. Run with \
             `sandpiper unit test build/{name}.wasm cases.json`; add cases as the unit grows."
        ),
        "hosts": [
            { "id": "h1", "metrics": { "memory_free_mib": 8192 } },
            { "id": "h2", "metrics": { "memory_free_mib": 2560 } },
            { "id": "h3", "metrics": { "memory_free_mib": 768 } }
        ],
        "vms": [
            { "id": "vm-a", "host": "h3", "memory_mib": 1024, "vcpus": 1 }
        ],
        "cases": cases,
    });
    let mut text = serde_json::to_string_pretty(&fixture).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(unix)]
fn make_executable(path: &Path, executable: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if executable {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn make_executable(_path: &Path, _executable: bool) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(names: &[&'static str]) -> BTreeSet<&'static str> {
        names.iter().copied().collect()
    }

    #[test]
    fn render_keeps_chosen_sections_and_fills_placeholders() {
        let template = "a {{x}}\n{{#filter}}\nf\n{{#rust}}\nfr\n{{/rust}}\n{{/filter}}\n{{#score}}\ns\n{{/score}}\nz\n";
        assert_eq!(
            render(template, &sections(&["filter"]), &[("x", "1")]),
            "a 1\nf\nz\n"
        );
        assert_eq!(
            render(
                template,
                &sections(&["filter", "rust", "score"]),
                &[("x", "2")]
            ),
            "a 2\nf\nfr\ns\nz\n"
        );
    }

    #[test]
    fn names_become_crates_and_types() {
        assert_eq!(crate_name("MemoryHeadroom"), "memory-headroom");
        assert_eq!(crate_name("memory_headroom2"), "memory-headroom2");
        assert_eq!(crate_name("Gpu4Affinity"), "gpu4-affinity");
        assert_eq!(type_name("memory-headroom"), "MemoryHeadroomUnit");
        assert_eq!(type_name("FitUnit"), "FitUnit");
        assert_eq!(type_name("Unit"), "UnitUnit");
        assert_eq!(type_name("Filter"), "FilterUnit");
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["", "9lives", "-x", "a b", "a/b", "é", &"x".repeat(65)] {
            assert!(matches!(check_name(bad), Err(NewError::Name(_))), "{bad:?}");
        }
        check_name("Memory_Headroom-2").expect("a good name");
    }

    #[test]
    fn every_language_and_role_set_renders_completely() {
        let all = [Role::Filter, Role::Score, Role::Balance];
        for lang in Language::value_variants() {
            for mask in 1..8u8 {
                let roles: Vec<Role> = (0..3)
                    .filter(|bit| mask & (1 << bit) != 0)
                    .map(|bit| all[bit])
                    .collect();
                let result = project("Fit", *lang, &roles, &default_sdk());
                if *lang == Language::C && roles.contains(&Role::Balance) {
                    assert!(matches!(result, Err(NewError::CBalance)));
                    continue;
                }
                for file in result.expect("a project") {
                    assert!(
                        !file.contents.contains("{{"),
                        "{lang:?} {roles:?}: {} keeps a placeholder",
                        file.path.display()
                    );
                }
            }
        }
    }

    #[test]
    fn the_world_matches_the_roles() {
        let exports = |filter, score, balance| Exports {
            filter,
            score,
            balance,
        };
        assert_eq!(world(exports(true, true, false)), "filter-score-unit");
        assert_eq!(world(exports(false, true, true)), "score-balance-unit");
        assert_eq!(world(exports(true, true, true)), "full-unit");
        assert_eq!(world(exports(false, false, true)), "balance-unit");
    }

    #[test]
    fn the_fixture_reads_as_a_fixture() {
        let text = fixture(
            "Fit",
            Exports {
                filter: true,
                score: true,
                balance: true,
            },
        );
        let parsed: crate::unit_cases::Fixture = serde_json::from_str(&text).expect("a fixture");
        assert_eq!(parsed.cases.len(), 4);
    }

    #[test]
    fn a_missing_source_tree_is_named() {
        let missing = Path::new("/nonexistent/sandpiper");
        assert!(matches!(
            project("Fit", Language::Python, &[Role::Filter], missing),
            Err(NewError::NoSdk(_))
        ));
    }
}
