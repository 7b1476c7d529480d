//! `sandpiper-c-component`: the two steps of building a C policy unit that
//! need the component-model toolchain, in one small binary so that a fresh
//! machine needs only Debian's clang, lld and wasi-libc besides Cargo.
//!
//! * `bindings` writes wit-bindgen's C bindings for one world of the WIT
//!   it is given (`scripts/build-unit.sh` gives `wit/0.2.0/`, the version
//!   the helper layer is written against; the same generator as `wit-bindgen
//!   c`, version pinned in the workspace), always under the file and type
//!   prefix `bindings`, so the helper layer in `guest-sdk/c` compiles
//!   against any world.
//! * `component` turns the `wasm32-wasi` (preview 1) reactor module clang
//!   links into a component, through wasmtime's own preview-1 adapter.
//!
//! `scripts/build-unit.sh c ...` runs both around clang.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_bindgen_core::wit_parser::Resolve;

/// The prefix of every generated file and world-level type
/// (`bindings.h`, `bindings_string_t`, ...). Fixed, not the world's name, so
/// one helper layer serves every world.
const BINDINGS_NAME: &str = "bindings";

const USAGE: &str = "\
usage:
  sandpiper-c-component bindings --wit <dir> --world <world> --out-dir <dir>
      Writes the C bindings of one world: bindings.h, bindings.c and
      bindings_component_type.o (the world's type, linked into the module so
      the `component` step knows it).
  sandpiper-c-component component <core.wasm> -o <component.wasm>
      Encodes a wasm32-wasi reactor core module as a component.";

/// What the command line asks for.
enum Command {
    Bindings {
        wit: PathBuf,
        world: String,
        out_dir: PathBuf,
    },
    Component {
        module: PathBuf,
        output: PathBuf,
    },
}

/// Reads the arguments after the program name. Flags take their value as the
/// next argument; there are too few to warrant an argument parser.
fn parse(mut args: impl Iterator<Item = String>) -> Result<Command> {
    let command = args.next().unwrap_or_default();
    let mut flags = std::collections::HashMap::new();
    let mut positional = Vec::new();
    while let Some(arg) = args.next() {
        if arg.starts_with('-') {
            let Some(value) = args.next() else {
                bail!("{arg} needs a value\n{USAGE}");
            };
            flags.insert(arg, value);
        } else {
            positional.push(arg);
        }
    }
    let mut flag = |name: &str| {
        flags
            .remove(name)
            .with_context(|| format!("missing {name}\n{USAGE}"))
    };
    let parsed = match (command.as_str(), positional.as_slice()) {
        ("bindings", []) => Command::Bindings {
            wit: flag("--wit")?.into(),
            world: flag("--world")?,
            out_dir: flag("--out-dir")?.into(),
        },
        ("component", [module]) => Command::Component {
            module: module.into(),
            output: flag("-o")?.into(),
        },
        _ => bail!("{USAGE}"),
    };
    if let Some(unknown) = flags.keys().next() {
        bail!("unknown option {unknown}\n{USAGE}");
    }
    Ok(parsed)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // The whole chain on one line, without anyhow's backtrace: this
            // is a build step, and the chain says which input is wrong.
            eprintln!("sandpiper-c-component: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    match parse(std::env::args().skip(1))? {
        Command::Bindings {
            wit,
            world,
            out_dir,
        } => write_bindings(&wit, &world, &out_dir),
        Command::Component { module, output } => {
            let core = std::fs::read(&module)
                .with_context(|| format!("reading core module {}", module.display()))?;
            let component = componentize(&core)
                .with_context(|| format!("encoding {} as a component", module.display()))?;
            std::fs::write(&output, component)
                .with_context(|| format!("writing {}", output.display()))
        }
    }
}

fn write_bindings(wit: &Path, world: &str, out_dir: &Path) -> Result<()> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_path(wit)
        .with_context(|| format!("parsing WIT at {}", wit.display()))?;
    let world_id = resolve
        .select_world(&[package], Some(world))
        .with_context(|| format!("no world `{world}` in {}", wit.display()))?;
    let options = wit_bindgen_c::Opts {
        rename_world: Some(BINDINGS_NAME.to_owned()),
        ..Default::default()
    };
    let mut files = wit_bindgen_core::Files::default();
    options
        .build()
        .generate(&mut resolve, world_id, &mut files)
        .with_context(|| format!("generating C bindings for `{world}`"))?;
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let mut written = 0;
    for (name, contents) in files.iter() {
        let path = out_dir.join(name);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        written += 1;
    }
    if written == 0 {
        bail!("wit-bindgen-c generated no files for `{world}`");
    }
    Ok(())
}

/// Encodes `core` (whose custom section names its world) as a component,
/// adapting its WASI preview-1 imports with wasmtime 48's reactor adapter.
fn componentize(core: &[u8]) -> Result<Vec<u8>> {
    wit_component::ComponentEncoder::default()
        .validate(true)
        .module(core)?
        .adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .encode()
}
