//! The `sandpiper` binary: `sandpiper serve` runs the server. Everything
//! else lives in the library; this file only parses the command line, sets
//! up logging and reports startup errors.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use sandpiper::config::ServeArgs;
use sandpiper::unit_test::UnitTestArgs;
use sandpiper::upload::{self, CompileArgs};

/// Sandpiper: a scheduling policy engine for VM clusters whose policies run
/// sandboxed in WebAssembly.
#[derive(Debug, Parser)]
#[command(name = "sandpiper", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the HTTP API server.
    Serve(Box<ServeArgs>),
    /// Validates and compiles one uploaded module read from stdin (run by
    /// the server in a child process; not for people).
    #[command(name = upload::COMPILE_SUBCOMMAND, hide = true)]
    CompileUnit(CompileArgs),
    /// Works with one unit locally, without a server.
    #[command(subcommand)]
    Unit(UnitCommand),
    /// Ganeti's IAllocator: answers the request in Ganeti's input file
    /// (installed as /usr/lib/ganeti/iallocators/sandpiper; docs/ganeti.md).
    Iallocator(Box<sandpiper::iallocator::IallocatorArgs>),
}

#[derive(Debug, Subcommand)]
enum UnitCommand {
    /// Runs a unit on a fixture (hosts, VM, parameters and expectations)
    /// and prints its verdicts, reasons, scores, fuel and time.
    Test(UnitTestArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::CompileUnit(args) => upload::compile_child(&args),
        Command::Unit(UnitCommand::Test(args)) => sandpiper::unit_test::main(&args),
        Command::Iallocator(args) => sandpiper::iallocator::main(&args),
        Command::Serve(args) => {
            init_logging();
            match serve(*args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    eprintln!("sandpiper: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sandpiper-api")
        .build()
        .context("could not start the async runtime")?;
    runtime.block_on(async {
        let server = sandpiper::server::Server::start(args)
            .await
            .context("could not start the server")?;
        // Tests and scripts read the bound address from this line (the
        // port may have been chosen by the OS).
        println!("listening on {}", server.local_addr());
        server.run().await.context("the server failed")
    })
}

/// Logs to stderr; `SANDPIPER_LOG` (or `RUST_LOG`) filters, default `info`.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SANDPIPER_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}
