//! `sandpiper-precompile OUT_DIR COMPONENT.wasm...`: compiles each component
//! with the server's settings ([`sandpiper_compile::config`]) for this
//! machine's CPU and writes `OUT_DIR/<file stem>.cwasm`.
//!
//! Run by `policies/builtins/build.rs` on the components it has just
//! built, so the server embeds their compiled code and its first start
//! loads it instead of compiling (docs/performance.md, "Start-up and
//! memory"). It trusts its input: only our own build runs it, on our own
//! units.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(out_dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: sandpiper-precompile OUT_DIR COMPONENT.wasm...");
        return ExitCode::from(2);
    };
    let engine = match sandpiper_compile::compiling_engine() {
        Ok(engine) => engine,
        Err(error) => {
            eprintln!("sandpiper-precompile: building the engine: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    for component in args.map(PathBuf::from) {
        if let Err(error) = precompile(&engine, &component, &out_dir) {
            eprintln!("sandpiper-precompile: {}: {error}", component.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn precompile(engine: &wasmtime::Engine, component: &Path, out_dir: &Path) -> Result<(), String> {
    let bytes = std::fs::read(component).map_err(|e| format!("reading: {e}"))?;
    let code = engine
        .precompile_component(&bytes)
        .map_err(|e| format!("compiling: {e:#}"))?;
    let stem = component.file_stem().ok_or("no file name")?;
    let out = out_dir.join(stem).with_extension("cwasm");
    std::fs::write(&out, code).map_err(|e| format!("writing {}: {e}", out.display()))
}
