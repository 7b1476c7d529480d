//! The `sandpiper` binary: `sandpiper serve` runs the server; the other
//! commands are its client (`sandpiper::cli`) and local tools. Everything
//! lives in the library; this file only chooses the process's allocator,
//! parses the command line, sets up logging and turns results into exit
//! statuses.

use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use sandpiper::cli::client::CliError;
use sandpiper::cli::{
    ClusterCommand, DecisionsArgs, InventoryCommand, PolicyCommand, Remote, ReplayArgs,
    ScheduleArgs, TokenCommand, UnitCommand, commands,
};
use sandpiper::config::ServeArgs;
use sandpiper::upload::{self, CompileArgs};

/// mimalloc instead of glibc's malloc: a decision allocates and frees a
/// request's worth of small values, which glibc made a measurable share of
/// the HTTP path (docs/performance.md, "The server's allocator"); its
/// options are set in `sandpiper::allocator`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Policy units: upload, list, enable, versions, roll back; `unit
    /// test` runs one locally.
    Unit {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: UnitCommand,
    },
    /// Scheduling policies: filters, weights, balance, properties.
    Policy {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Clusters and the policy each runs.
    Cluster {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// The hosts and VMs Sandpiper holds for a cluster.
    Inventory {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: InventoryCommand,
    },
    /// Asks where a VM should start, with the explain record.
    Schedule {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        args: ScheduleArgs,
    },
    /// One decision from the log, readable: rejections per filter, the
    /// cost table, the tie-break.
    Explain {
        #[command(flatten)]
        remote: Remote,
        /// The decision's id.
        decision: String,
        /// Its cluster [default: every cluster is searched].
        #[arg(long)]
        cluster: Option<String>,
    },
    /// A logged decision decided again with another policy (a dry run
    /// over the inventory held now), beside the decision as it was made.
    Replay {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        args: ReplayArgs,
    },
    /// The decisions log, newest first.
    Decisions {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        args: DecisionsArgs,
    },
    /// Bearer tokens.
    Token {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Checks a server and token, and saves them for the other commands.
    Login {
        #[arg(long, env = "SANDPIPER_URL")]
        server: String,
        #[arg(long, env = "SANDPIPER_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// The CA that signed an `https://` server's certificate (PEM).
        #[arg(long, env = "SANDPIPER_CA_CERT")]
        ca_cert: Option<std::path::PathBuf>,
    },
    /// Ganeti's IAllocator: answers the request in Ganeti's input file
    /// (installed as /usr/lib/ganeti/iallocators/sandpiper; docs/ganeti.md).
    Iallocator(Box<sandpiper::iallocator::IallocatorArgs>),
    /// Replays VM arrivals and departures against policies on a copy of a
    /// cluster, and reports how each placed and spread them
    /// (docs/simulator.md).
    Simulate(Box<sandpiper::simulate::command::SimulateArgs>),
    /// Prints shell completions (`sandpiper completions bash >
    /// /etc/bash_completion.d/sandpiper`).
    Completions { shell: clap_complete::Shell },
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

fn main() -> ExitCode {
    sandpiper::allocator::configure();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::CompileUnit(args) => return upload::compile_child(&args),
        Command::Iallocator(args) => return sandpiper::iallocator::main(&args),
        Command::Simulate(args) => return sandpiper::simulate::command::main(&args),
        Command::Unit {
            command: UnitCommand::Test(args),
            remote,
        } => return sandpiper::unit_test::main(&args, remote.output),
        Command::Unit {
            command: UnitCommand::New(args),
            remote,
        } => return sandpiper::unit_new::main(&args, remote.output),
        Command::Serve(serve_command) => {
            let Serve { args, log_format } = *serve_command;
            init_logging(log_format);
            return match serve(args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    eprintln!("sandpiper: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Completions { shell } => {
            // Written whole and checked: clap_complete panics on a failed
            // write (a closed pipe, `| head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "sandpiper", &mut script);
            return match std::io::Write::write_all(&mut std::io::stdout(), &script) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            };
        }
        Command::Unit { remote, command } => commands::unit(&remote, command),
        Command::Policy { remote, command } => commands::policy(&remote, command),
        Command::Cluster { remote, command } => commands::cluster(&remote, command),
        Command::Inventory { remote, command } => commands::inventory(&remote, command),
        Command::Schedule { remote, args } => commands::schedule(&remote, args),
        Command::Explain {
            remote,
            decision,
            cluster,
        } => commands::explain(&remote, &decision, cluster.as_deref()),
        Command::Replay { remote, args } => commands::replay(&remote, args),
        Command::Decisions { remote, args } => commands::decisions(&remote, args),
        Command::Token { remote, command } => commands::token(&remote, command),
        Command::Login {
            server,
            token,
            ca_cert,
        } => commands::login(&server, token, ca_cert),
    };
    client_exit(result)
}

/// A client command's exit status, with its error on stderr.
fn client_exit(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandpiper: {e}");
            ExitCode::from(e.exit_code())
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
