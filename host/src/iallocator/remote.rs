//! Picks made by a Sandpiper server with its cluster's policy:
//! `POST /api/v1/clusters/{id}/schedule` with the translated nodes inline
//! (`hosts`, `vms`, `candidates`), which decides with
//! `placement::over_snapshot` and claims nothing; the answer's `chosen_host`
//! and its explain record's filter rejections are read back.
//!
//! The client is the command line's (`cli::client`, blocking, `https://`
//! with `--ca-cert` for a server with its own CA): the command runs once
//! per Ganeti request, so an async runtime would only add start-up time.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::decide::{Decide, DecideError, Pick};
use crate::cli::client::{CliError, Client};
use crate::snapshot::{Snapshot, VmSpec};

/// How long one call to the server may take in all, seconds: Ganeti waits
/// for the allocator while holding the job's locks, so a hung server must
/// not hold them long; a decision at 1,000 nodes takes milliseconds.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A server and the cluster whose policy decides.
pub struct Remote {
    client: Client,
    cluster: String,
    /// The cluster's id, once looked up from its name.
    id: std::sync::OnceLock<String>,
}

#[derive(Deserialize)]
struct Answer {
    chosen_host: Option<String>,
    #[serde(default)]
    explain: Option<Explain>,
}

#[derive(Deserialize)]
struct Explain {
    #[serde(default)]
    filters: Vec<Filter>,
}

#[derive(Deserialize)]
struct Filter {
    unit: String,
    #[serde(default)]
    rejected: Vec<Rejected>,
}

#[derive(Deserialize)]
struct Rejected {
    #[serde(default)]
    hosts: Vec<serde_json::Value>,
}

impl Remote {
    /// A client for `base` (e.g. `http://127.0.0.1:8080`); `cluster` is
    /// an id or a name.
    pub fn new(
        base: &str,
        cluster: &str,
        token: Option<&str>,
        ca_cert: Option<&Path>,
    ) -> Result<Remote, DecideError> {
        let client = Client::with_timeout(base, token.map(str::to_owned), ca_cert, REQUEST_TIMEOUT)
            .map_err(remote)?;
        Ok(Remote {
            client,
            cluster: cluster.to_owned(),
            id: std::sync::OnceLock::new(),
        })
    }

    /// The cluster's id: as given when it is a UUID, else looked up.
    fn cluster_id(&self) -> Result<String, DecideError> {
        if let Some(id) = self.id.get() {
            return Ok(id.clone());
        }
        let id = if uuid::Uuid::parse_str(&self.cluster).is_ok() {
            self.cluster.clone()
        } else {
            let clusters = self.client.get("/api/v1/clusters").map_err(remote)?;
            clusters
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| {
                    c["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case(&self.cluster))
                })
                .and_then(|c| c["id"].as_str())
                .map(str::to_owned)
                .ok_or_else(|| DecideError::Remote(format!("no cluster `{}`", self.cluster)))?
        };
        Ok(self.id.get_or_init(|| id).clone())
    }
}

fn remote(e: CliError) -> DecideError {
    DecideError::Remote(e.to_string())
}

impl Decide for Remote {
    fn pick(
        &self,
        snapshot: &Snapshot,
        vm: &VmSpec,
        candidates: &[String],
    ) -> Result<Pick, DecideError> {
        let id = self.cluster_id()?;
        let body = json!({
            "vm": vm,
            "hosts": snapshot.hosts,
            "vms": snapshot.vms,
            "candidates": candidates,
        });
        let answer = self
            .client
            .post(&format!("/api/v1/clusters/{id}/schedule"), &body)
            .map_err(remote)?;
        let answer: Answer = serde_json::from_value(answer)
            .map_err(|e| DecideError::Remote(format!("the answer: {e}")))?;
        let mut refused = BTreeMap::new();
        for filter in answer.explain.map(|e| e.filters).unwrap_or_default() {
            let count: usize = filter.rejected.iter().map(|r| r.hosts.len()).sum();
            if count > 0 {
                *refused.entry(filter.unit).or_default() += count;
            }
        }
        Ok(Pick {
            chosen: answer.chosen_host,
            refused,
        })
    }
}
