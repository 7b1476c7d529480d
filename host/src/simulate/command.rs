//! `sandpiper simulate`: the simulator in this process, with policies
//! assembled from the built-in units as `sandpiper iallocator` assembles
//! them (`iallocator::policy`: a built-in policy's name or a policy file,
//! compiled units cached per user), and `sandpiper simulate
//! generate-trace`, which prints a generated trace to read or edit.
//!
//! Exit status: 0 with the report written; 1 when an input cannot be read
//! or is refused (the message names the file, line and field), or a
//! replay fails; 2 for a bad command line (clap's).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use super::generate::{GenerateError, GenerateParams, VmSize, generate};
use super::run::{
    Candidate, DEFAULT_BALANCE_EVERY_S, DEFAULT_SAMPLE_EVERY_S, Intervals, SimulateError, Start,
};
use super::trace::{self, MAX_TRACE_BYTES, Trace, TraceError};
use super::{MAX_POLICIES, render, simulate};
use crate::iallocator::policy::{self, PolicyError};
use crate::snapshot::Snapshot;

/// The largest cluster snapshot file read, bytes: a host in the snapshot
/// format is about a kilobyte, so 64 MiB holds tens of thousands of hosts
/// and VMs, the same bound as `sandpiper iallocator`'s input.
pub const MAX_SNAPSHOT_FILE_BYTES: u64 = crate::iallocator::MAX_INPUT_BYTES;

/// `sandpiper simulate`.
#[derive(Clone, Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub command: Option<SimulateCommand>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// What `sandpiper simulate` does besides a simulation.
#[derive(Clone, Debug, Subcommand)]
pub enum SimulateCommand {
    /// Prints a generated trace (JSON Lines, or CSV), to read, edit and
    /// pass back with `--trace`.
    GenerateTrace {
        #[command(flatten)]
        generator: GeneratorArgs,
        /// `jsonl` or `csv`.
        #[arg(long, value_enum, default_value_t = TraceFormat::Jsonl)]
        format: TraceFormat,
    },
}

/// A trace file's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TraceFormat {
    Jsonl,
    Csv,
}

/// A simulation.
#[derive(Clone, Debug, Args)]
pub struct RunArgs {
    /// The starting cluster: a JSON file `{"hosts": [...], "vms": [...]}`
    /// in the snapshot format the API takes inline.
    #[arg(long, required = true)]
    pub cluster_snapshot: Option<PathBuf>,
    /// A trace file (JSON Lines or CSV; docs/simulator.md). Without it, a
    /// trace is generated from the generator's flags.
    #[arg(long, conflicts_with = "generator")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub generator: GeneratorArgs,
    /// A policy to compare: a built-in policy's name (`evenly_distributed`,
    /// `power_saving`, `none`, `nova_default`, ...) or a policy file; 1
    /// to 8 of them, repeated.
    #[arg(long = "policy", required = true)]
    pub policies: Vec<String>,
    /// Seconds of trace time between balancing rounds (0: never balance).
    #[arg(long, default_value_t = DEFAULT_BALANCE_EVERY_S)]
    pub balance_every_s: u64,
    /// Seconds of trace time between samples of the cluster.
    #[arg(long, default_value_t = DEFAULT_SAMPLE_EVERY_S)]
    pub sample_every_s: u64,
    /// `table` for people, `json` (the report), `html` (a page with
    /// charts), `svg` (the charts).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ReportFormat::Table)]
    pub output: ReportFormat,
    /// Write the report to this file instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// How the report is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
    Html,
    Svg,
}

/// The generator's parameters; each absent one takes
/// `GenerateParams::default()`'s value.
#[derive(Clone, Debug, Default, Args)]
#[group(id = "generator", multiple = true)]
pub struct GeneratorArgs {
    /// The generator's seed [default: 0].
    #[arg(long)]
    pub seed: Option<u64>,
    /// How many VMs arrive [default: 200].
    #[arg(long)]
    pub arrivals: Option<u32>,
    /// Mean arrivals per hour, a Poisson process [default: 60].
    #[arg(long)]
    pub arrivals_per_hour: Option<f64>,
    /// Mean VM lifetime, seconds, exponential [default: 14400].
    #[arg(long)]
    pub mean_lifetime_s: Option<f64>,
    /// Where the trace ends, seconds [default: the last arrival].
    #[arg(long)]
    pub duration_s: Option<u64>,
    /// A VM size of the mix, `MEMORY_MIB:VCPUS[:WEIGHT]`, repeated
    /// [default: 2048:1:4, 4096:2:3, 8192:4:2, 16384:8:1].
    #[arg(long = "size", value_name = "MEMORY_MIB:VCPUS[:WEIGHT]")]
    pub sizes: Vec<VmSize>,
}

impl GeneratorArgs {
    /// The parameters, defaults filled in.
    pub fn params(&self) -> GenerateParams {
        let default = GenerateParams::default();
        GenerateParams {
            seed: self.seed.unwrap_or(default.seed),
            arrivals: self.arrivals.unwrap_or(default.arrivals),
            arrivals_per_hour: self.arrivals_per_hour.unwrap_or(default.arrivals_per_hour),
            mean_lifetime_s: self.mean_lifetime_s.unwrap_or(default.mean_lifetime_s),
            duration_s: self.duration_s.or(default.duration_s),
            sizes: if self.sizes.is_empty() {
                default.sizes
            } else {
                self.sizes.clone()
            },
        }
    }
}

/// Why `sandpiper simulate` failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path} is larger than {limit} bytes")]
    TooLarge { path: String, limit: u64 },
    #[error("{path}: {field}: {message}")]
    Snapshot {
        path: String,
        field: String,
        message: String,
    },
    #[error("{path}: {error}")]
    Trace { path: String, error: TraceError },
    #[error("the generator: {0}")]
    Generate(#[from] GenerateError),
    #[error("at most {MAX_POLICIES} policies may be compared")]
    TooManyPolicies,
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Simulate(#[from] SimulateError),
    #[error(
        "the trace has VMs with more than CSV holds (only id, memory_mib, vcpus); write it as JSON Lines"
    )]
    NotCsv,
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
}

/// Runs `sandpiper simulate`.
pub fn main(args: &SimulateArgs) -> ExitCode {
    let outcome = match &args.command {
        Some(SimulateCommand::GenerateTrace { generator, format }) => {
            generate_trace(generator, *format).and_then(|text| write(None, &text))
        }
        None => run(&args.run).and_then(|text| write(args.run.out.as_deref(), &text)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sandpiper simulate: {error}");
            ExitCode::FAILURE
        }
    }
}

fn generate_trace(generator: &GeneratorArgs, format: TraceFormat) -> Result<String, CommandError> {
    let trace = generate(&generator.params())?;
    match format {
        TraceFormat::Jsonl => trace::to_jsonl(&trace).map_err(|e| CommandError::Write {
            path: "stdout".to_owned(),
            message: e.to_string(),
        }),
        TraceFormat::Csv => trace::to_csv(&trace).ok_or(CommandError::NotCsv),
    }
}

/// The simulation the arguments ask for, written in their format.
pub fn run(args: &RunArgs) -> Result<String, CommandError> {
    if args.policies.len() > MAX_POLICIES {
        return Err(CommandError::TooManyPolicies);
    }
    let snapshot_path = args
        .cluster_snapshot
        .as_deref()
        .ok_or_else(|| CommandError::Read {
            path: "--cluster-snapshot".to_owned(),
            message: "required".to_owned(),
        })?;
    let start = Start::from_snapshot(read_snapshot(snapshot_path)?)?;
    let trace = read_trace(args)?;
    let candidates = args
        .policies
        .iter()
        .map(|name| {
            let builtin = policy::resolve(name)?;
            let local = policy::local(&builtin)?;
            Ok(Candidate {
                name: builtin.name,
                policy_id: None,
                policy: local.policy,
                params: local.params,
            })
        })
        .collect::<Result<Vec<_>, CommandError>>()?;
    let intervals = Intervals {
        balance_every_s: args.balance_every_s,
        sample_every_s: args.sample_every_s,
    };
    let report = simulate(&start, &trace, &candidates, intervals)?;
    Ok(match args.output {
        ReportFormat::Table => report.table(),
        ReportFormat::Json => {
            let mut json =
                serde_json::to_string_pretty(&report).map_err(|e| CommandError::Write {
                    path: "the report".to_owned(),
                    message: e.to_string(),
                })?;
            json.push('\n');
            json
        }
        ReportFormat::Html => render::html(&report),
        ReportFormat::Svg => render::svg(&report),
    })
}

fn read_snapshot(path: &Path) -> Result<Snapshot, CommandError> {
    let bytes = read_limited(path, MAX_SNAPSHOT_FILE_BYTES)?;
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| CommandError::Snapshot {
        path: path.display().to_string(),
        field: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

fn read_trace(args: &RunArgs) -> Result<Trace, CommandError> {
    let Some(path) = &args.trace else {
        return Ok(generate(&args.generator.params())?);
    };
    let bytes = read_limited(path, MAX_TRACE_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|e| CommandError::Read {
        path: path.display().to_string(),
        message: format!("not UTF-8: {e}"),
    })?;
    trace::parse(&text).map_err(|error| CommandError::Trace {
        path: path.display().to_string(),
        error,
    })
}

/// A file's bytes, at most `limit` of them (`-` reads stdin).
fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, CommandError> {
    crate::inputs::read_at_most(path, limit)
        .map_err(|e| CommandError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?
        .ok_or_else(|| CommandError::TooLarge {
            path: path.display().to_string(),
            limit,
        })
}

/// Writes `text` to `path`, or stdout.
fn write(path: Option<&Path>, text: &str) -> Result<(), CommandError> {
    let fail = |path: &str, e: std::io::Error| CommandError::Write {
        path: path.to_owned(),
        message: e.to_string(),
    };
    match path {
        Some(path) => std::fs::write(path, text).map_err(|e| fail(&path.display().to_string(), e)),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(|e| fail("stdout", e))
        }
    }
}
