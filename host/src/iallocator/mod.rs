//! Ganeti's IAllocator protocol (`doc/iallocator.rst`, version 2): the
//! `sandpiper iallocator` command, installed as
//! `/usr/lib/ganeti/iallocators/sandpiper` so that
//! `gnt-instance add -I sandpiper` asks Sandpiper where an instance goes
//! (docs/ganeti.md). Ganeti runs it with the path of a JSON file holding
//! the whole cluster and one request; it prints
//! `{"success": …, "info": …, "result": …}`.
//!
//! A thin translation onto the one decision, as every front door: the
//! input is read ([`wire`]) and turned into a snapshot ([`translate`]),
//! each request type becomes picks ([`requests`]), and each pick is
//! `placement::over_snapshot` with a policy: one assembled in process
//! from the built-in units ([`policy`], [`decide::Local`]), or the
//! cluster's own on a server, asked with the nodes inline
//! ([`remote::Remote`]). Nothing is claimed: Ganeti runs the instance
//! creation itself, and the next call sends the cluster as it then is.
//!
//! **Exit status, as hail's** (`test/hs/shelltests/htools-hail.test`): 0
//! whenever a request was decided, whether or not a node fits (then
//! `success` is false and `info` counts the refusals per reason:
//! `FailMem: 3, FailDisk: 1`); 1 when the input cannot be read or is not a
//! valid request, or no decision can be made (no policy, the server
//! unreachable). Ganeti shows the output of a failed run to the user, so
//! the envelope is printed then too, with `success: false` and the reason,
//! which also goes to stderr.

pub mod decide;
pub mod policy;
pub mod remote;
pub mod requests;
pub mod translate;
pub mod wire;

#[cfg(test)]
mod golden;

use std::path::PathBuf;
use std::process::ExitCode;

use self::decide::Decide;
use self::translate::Cluster;
use self::wire::{Envelope, Input, InputError};

/// The largest input file read, bytes. Ganeti writes about 1 KiB per node
/// and per instance; 64 MiB holds tens of thousands of each, and keeps a
/// runaway file from filling memory.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Exit status when the request was decided (a node found or not).
pub const EXIT_DECIDED: u8 = 0;
/// Exit status when it could not be (hail's non-zero exit on bad input).
pub const EXIT_ERROR: u8 = 1;

/// The environment variable holding the server's bearer token.
pub const TOKEN_ENV: &str = "SANDPIPER_TOKEN";

/// `sandpiper iallocator`.
#[derive(Clone, Debug, clap::Args)]
pub struct IallocatorArgs {
    /// The input file Ganeti wrote (`-` reads stdin).
    pub input: PathBuf,
    /// Decide on this Sandpiper server (e.g. `http://sandpiper:8080`)
    /// with its cluster's policy, instead of in process.
    #[arg(long, requires = "cluster", conflicts_with = "policy")]
    pub server: Option<String>,
    /// The server's cluster whose policy decides: its id or name.
    #[arg(long, requires = "server")]
    pub cluster: Option<String>,
    /// The server's bearer token (an `engine` token).
    #[arg(long, env = TOKEN_ENV, hide_env_values = true)]
    pub token: Option<String>,
    /// The CA that signed an `https://` server's certificate (PEM).
    #[arg(long, env = "SANDPIPER_CA_CERT", requires = "server")]
    pub ca_cert: Option<PathBuf>,
    /// Offline: a built-in policy's name or a policy file (the shape of
    /// policies/defaults/*.json).
    #[arg(long, default_value = policy::DEFAULT_POLICY)]
    pub policy: String,
}

/// Why a run could not decide.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("the input is larger than {MAX_INPUT_BYTES} bytes")]
    TooLarge,
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Request(#[from] requests::RequestError),
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
}

/// Runs `sandpiper iallocator`: the envelope on stdout, an error also on
/// stderr, hail's exit status.
pub fn main(args: &IallocatorArgs) -> ExitCode {
    let outcome = read_input(&args.input).and_then(|bytes| {
        let decide: Box<dyn Decide> = match (&args.server, &args.cluster) {
            (Some(server), Some(cluster)) => Box::new(
                remote::Remote::new(
                    server,
                    cluster,
                    args.token.as_deref(),
                    args.ca_cert.as_deref(),
                )
                .map_err(requests::RequestError::from)?,
            ),
            _ => Box::new(policy::local(&policy::resolve(&args.policy)?)?),
        };
        run(&bytes, decide.as_ref())
    });
    let (envelope, status) = match outcome {
        Ok(envelope) => (envelope, EXIT_DECIDED),
        Err(error) => {
            eprintln!("sandpiper iallocator: {error}");
            (Envelope::failed(error.to_string()), EXIT_ERROR)
        }
    };
    match serde_json::to_string(&envelope) {
        Ok(json) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            if writeln!(out, "{json}").and_then(|()| out.flush()).is_err() {
                return ExitCode::from(EXIT_ERROR);
            }
            ExitCode::from(status)
        }
        Err(_) => ExitCode::from(EXIT_ERROR),
    }
}

/// Answers an input file's bytes with `decide`'s picks.
pub fn run(bytes: &[u8], decide: &dyn Decide) -> Result<Envelope, RunError> {
    let (input, request) = Input::parse(bytes)?;
    let mut cluster = Cluster::new(&input)?;
    Ok(requests::answer(&mut cluster, &request, decide)?)
}

/// Reads the input file (or stdin for `-`), at most [`MAX_INPUT_BYTES`].
pub fn read_input(path: &std::path::Path) -> Result<Vec<u8>, RunError> {
    crate::inputs::read_at_most(path, MAX_INPUT_BYTES)
        .map_err(|e| RunError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?
        .ok_or(RunError::TooLarge)
}
