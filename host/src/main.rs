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
    Serve(Box<Serve>),
    /// Validates and compiles one uploaded module read from stdin (run by
    /// the server in a child process; not for people).
    #[command(name = upload::COMPILE_SUBCOMMAND, hide = true)]
    CompileUnit(CompileArgs),
    /// Works with one unit locally, without a server.
    #[command(subcommand)]
    Unit(UnitCommand),
}

/// `sandpiper serve`: the server's arguments and how it logs.
#[derive(Debug, clap::Args)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
    /// How log lines are written to stderr: `text` for people, `json` (one
    /// object per line, with the request's span fields) for log
    /// collectors. What is logged is set by `SANDPIPER_LOG` or `RUST_LOG`.
    #[arg(long, env = "SANDPIPER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// The log line formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
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
        Command::Serve(serve_command) => {
            let Serve { args, log_format } = *serve_command;
            init_logging(log_format);
            match serve(args) {
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

/// Logs to stderr in `format`; `SANDPIPER_LOG` (or `RUST_LOG`) filters,
/// default `info` (which includes one access line per request, target
/// `sandpiper::access`).
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SANDPIPER_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        // The request's span (its id, route, cluster, decision) is in
        // every line's `span` field; `spans` would repeat it.
        LogFormat::Json => builder.json().with_span_list(false).init(),
    }
}
