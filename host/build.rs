//! Lists the store's migrations from their folders, as sqlx's `migrate!`
//! macro would, so that a folder stays the list without the macro.
//!
//! Why not the macro: it needs sqlx's `macros` feature (and `derive` alone
//! turns the same machinery on), with which cargo compiles sqlx's SQLite
//! and PostgreSQL drivers, SQLite's C source and rustls a second time, for
//! the proc-macro, on every clean build: minutes on CI's two cores for two
//! folder listings. `src/store/migrations.rs` builds sqlx's `Migrator`
//! from this list at run time, with the checksums the macro would compute.
//!
//! A file is `<version>_<description>.sql`, as sqlx reads it: the version
//! an integer, `_` in the description read as a space.
//!
//! It also lists the admin console's files (`console/`, served by
//! `src/console.rs`) the same way, so that a new page is a new file and no
//! code names it.

use std::fmt::Write;
use std::path::Path;

/// The folders, relative to this package, and the constant each becomes.
const FOLDERS: &[(&str, &str)] = &[
    ("migrations", "SQLITE"),
    ("migrations/postgres", "POSTGRES"),
];

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let mut listing = String::new();
    for (folder, constant) in FOLDERS {
        let dir = Path::new(&manifest_dir).join(folder);
        println!("cargo::rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
            .collect();
        files.sort();
        writeln!(listing, "pub const {constant}: &[EmbeddedMigration] = &[").unwrap();
        for path in &files {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("a UTF-8 file name");
            let (version, description) = name
                .split_once('_')
                .and_then(|(v, d)| Some((v.parse::<i64>().ok()?, d.replace('_', " "))))
                .unwrap_or_else(|| panic!("{}: not <version>_<description>.sql", path.display()));
            writeln!(
                listing,
                "    EmbeddedMigration {{ version: {version}, description: {description:?}, \
                 sql: include_str!({:?}) }},",
                path.display().to_string()
            )
            .unwrap();
        }
        writeln!(listing, "];").unwrap();
    }
    std::fs::write(Path::new(&out_dir).join("migrations.rs"), listing)
        .expect("writing migrations.rs");
    list_console(Path::new(&manifest_dir), Path::new(&out_dir));
}

/// Writes `console_files.rs`: `FILES`, every file under `console/` as its
/// path relative to that folder (with `/`) and its bytes, sorted by path.
fn list_console(manifest_dir: &Path, out_dir: &Path) {
    let root = manifest_dir.join("console");
    println!("cargo::rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    let mut listing = String::from("pub const FILES: &[(&str, &[u8])] = &[\n");
    for path in &files {
        let relative = path
            .strip_prefix(&root)
            .expect("under console/")
            .components()
            .map(|c| c.as_os_str().to_str().expect("a UTF-8 file name"))
            .collect::<Vec<_>>()
            .join("/");
        writeln!(
            listing,
            "    ({relative:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    listing.push_str("];\n");
    std::fs::write(out_dir.join("console_files.rs"), listing).expect("writing console_files.rs");
}

/// Every file under `dir`. Cargo scans a folder named by
/// `rerun-if-changed` whole, so the root alone makes any added, removed or
/// edited file rebuild the listing.
fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
    {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            walk(&path, files);
        } else {
            files.push(path);
        }
    }
}
