//! The `sandpiper` command line as a client of a running server, as
//! `openstack` and `kubectl` are of theirs: units, policies, clusters,
//! inventories, decisions and tokens, by name or id, printed as tables for
//! people or as the API's JSON for scripts (`-o json`). Every command is
//! one or a few calls of the public API ([`client`]); nothing here decides
//! or stores anything itself. docs/cli.md has the tour and the exit codes.
//!
//! The server and token come from `--server`/`--token`, else
//! `SANDPIPER_URL`/`SANDPIPER_TOKEN`, else the file `sandpiper login`
//! writes ([`config`]).

pub mod client;
pub mod commands;
pub mod config;
pub mod explain;
pub mod output;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use self::output::Format;

/// Where the server is, who is asking, and how to print.
#[derive(Clone, Debug, Args)]
pub struct Remote {
    /// The server's URL [default: `sandpiper login`'s, else
    /// http://127.0.0.1:8080].
    #[arg(long, global = true, env = "SANDPIPER_URL")]
    pub server: Option<String>,
    /// A bearer token [default: `sandpiper login`'s].
    #[arg(long, global = true, env = "SANDPIPER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A PEM file of the CA that signed an `https://` server's
    /// certificate, trusted instead of Mozilla's roots [default:
    /// `sandpiper login`'s].
    #[arg(long, global = true, env = "SANDPIPER_CA_CERT")]
    pub ca_cert: Option<std::path::PathBuf>,
    /// How to print: `table` for people, `json` (the API's answer) for
    /// scripts.
    #[arg(
        short = 'o',
        long = "output",
        global = true,
        value_enum,
        default_value_t
    )]
    pub output: Format,
}

/// `sandpiper unit ...`: policy units on the server.
#[derive(Debug, Subcommand)]
pub enum UnitCommand {
    /// Lists every unit.
    List,
    /// Shows one unit (by name or id), with its parameters.
    Show { unit: String },
    /// Uploads a component (`.wasm`); the server validates and compiles it.
    Push {
        file: PathBuf,
        /// The unit's name instead of the module's own.
        #[arg(long)]
        name: Option<String>,
        /// The unit's description instead of the module's own.
        #[arg(long)]
        description: Option<String>,
        /// Replace the module of the unit called `--name` (or the module's
        /// own name), keeping its place in every policy; the old module
        /// stays as a version.
        #[arg(long)]
        replace: bool,
    },
    /// Deletes a unit no policy uses.
    Rm { unit: String },
    /// Lets decisions run the unit again.
    Enable { unit: String },
    /// Leaves the unit out of every decision.
    Disable { unit: String },
    /// Lists the modules the unit has run, newest (current) first.
    Versions { unit: String },
    /// Restores an earlier version (see `versions`).
    Rollback { unit: String, version: i64 },
    /// Runs a unit on a fixture locally, without a server, and prints its
    /// verdicts, reasons, scores, fuel and time.
    Test(crate::unit_test::UnitTestArgs),
    /// Writes a new unit project: source in `--lang` implementing
    /// `--roles`, a build script and a fixture `unit test` passes.
    New(crate::unit_new::UnitNewArgs),
}

/// Where a filter runs in its policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FilterPosition {
    First,
    Middle,
    Last,
}

/// `sandpiper policy ...`: scheduling policies.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Lists every policy.
    List,
    /// Shows one policy: filters in order, weights with factors, balance,
    /// properties.
    Show { policy: String },
    /// Creates an empty policy.
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        /// How weights combine: `rank` (oVirt) or `normalised` (Nova).
        #[arg(long)]
        combination: Option<String>,
    },
    /// Copies a policy (a locked built-in one too) under a new name.
    Clone { policy: String, name: String },
    /// Changes a policy's name, description, combination, or makes it the
    /// default.
    Edit {
        policy: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        combination: Option<String>,
        /// Clusters created without a policy get this one.
        #[arg(long)]
        default: bool,
    },
    /// Deletes a policy no cluster uses.
    Rm { policy: String },
    /// Adds a unit as a filter.
    AddFilter {
        policy: String,
        unit: String,
        #[arg(long, value_enum, default_value = "middle")]
        position: FilterPosition,
        /// When the unit fails, let every host through instead of failing
        /// the decision.
        #[arg(long)]
        fail_open: bool,
        /// Run it for the first instance of a multi-instance request only.
        #[arg(long)]
        run_once: bool,
    },
    /// Adds a unit as a weight.
    AddWeight {
        policy: String,
        unit: String,
        #[arg(long, default_value_t = 1)]
        factor: i64,
    },
    /// Makes a unit the policy's balancer.
    SetBalance { policy: String, unit: String },
    /// Takes a unit out of every slot of the policy.
    Remove { policy: String, unit: String },
    /// Sets properties (`Key=Value`); an empty value removes the key.
    SetParam {
        policy: String,
        #[arg(required = true)]
        properties: Vec<String>,
    },
}

/// `sandpiper cluster ...`: clusters and the policy each runs.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Lists every cluster.
    List,
    /// Shows one cluster.
    Show { cluster: String },
    /// Creates a cluster.
    Create {
        name: String,
        /// Its policy (name or id) [default: the default policy].
        #[arg(long)]
        policy: Option<String>,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Gives a cluster another policy.
    Attach { cluster: String, policy: String },
    /// Deletes a cluster, with its inventory, claims and decisions.
    Rm { cluster: String },
}

/// `sandpiper inventory ...`: what Sandpiper holds of a cluster.
#[derive(Debug, Subcommand)]
pub enum InventoryCommand {
    /// Replaces the held inventory with a snapshot file (`{"hosts":
    /// [...], "vms": [...]}`, with or without `generation`).
    Push {
        cluster: String,
        file: PathBuf,
        /// The snapshot's generation [default: the file's, else one above
        /// the held one].
        #[arg(long)]
        generation: Option<u64>,
    },
    /// Shows the held hosts with their use.
    Show { cluster: String },
}

/// `sandpiper schedule`: where would (or should) a VM start?
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    pub cluster: String,
    /// A request body from a file (`{"vm": {...}, "hosts": [...]}`), as
    /// `POST .../schedule` takes; the flags below are ignored then.
    #[arg(long, short = 'f')]
    pub file: Option<PathBuf>,
    #[arg(long, default_value = "vm-1")]
    pub vm_id: String,
    #[arg(long)]
    pub memory_mib: Option<u64>,
    #[arg(long)]
    pub vcpus: Option<u32>,
    /// Decide, but record and claim nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// What-if: decide with this policy (name or id) instead of the
    /// cluster's; only with `--dry-run` (docs/what-if.md).
    #[arg(long, requires = "dry_run")]
    pub policy: Option<String>,
}

/// `sandpiper replay`: a logged decision decided again, as a dry run.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The decision's id.
    pub decision: String,
    /// Its cluster (name or id).
    #[arg(long)]
    pub cluster: String,
    /// The policy to decide with (name or id) [default: the cluster's].
    #[arg(long)]
    pub policy: Option<String>,
}

/// `sandpiper decisions`: the decisions log.
#[derive(Debug, Args)]
pub struct DecisionsArgs {
    #[arg(long)]
    pub cluster: Option<String>,
    #[arg(long)]
    pub vm: Option<String>,
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
}

/// `sandpiper token ...`: bearer tokens.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Lists every token, revoked ones too.
    List,
    /// Creates a token and prints its secret, once.
    Create {
        name: String,
        /// `reader`, `engine` or `admin`.
        #[arg(long, default_value = "reader")]
        role: String,
    },
    /// Revokes a token (by name or id).
    Revoke {
        // Not `token`: that id is the global `--token`'s.
        #[arg(value_name = "TOKEN")]
        name: String,
    },
}
