//! Picks made by a Sandpiper server with its cluster's policy:
//! `POST /api/v1/clusters/{id}/schedule` with the translated nodes inline
//! (`hosts`, `vms`, `candidates`), which decides with
//! `placement::over_snapshot` and claims nothing; the answer's `chosen_host`
//! and its explain record's filter rejections are read back.
//!
//! The client is `ureq` (blocking, no TLS compiled in): the command runs
//! once per Ganeti request, so an async runtime would only add start-up
//! time. Use `http://` to a server on the same host or network, or a
//! TLS-terminating proxy next to the Ganeti master.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::decide::{Decide, DecideError, Pick};
use crate::snapshot::{Snapshot, VmSpec};

/// How long one call to the server may take in all, seconds: Ganeti waits
/// for the allocator while holding the job's locks, so a hung server must
/// not hold them long; a decision at 1,000 nodes takes milliseconds.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read, bytes: an inline answer carries the explain
/// record, about 1 KiB per node.
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;

/// A server and the cluster whose policy decides.
pub struct Remote {
    base: String,
    cluster: String,
    token: Option<String>,
    agent: ureq::Agent,
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

#[derive(Deserialize)]
struct ClusterItem {
    id: String,
    name: String,
}

impl Remote {
    /// A client for `base` (e.g. `http://127.0.0.1:8080`); `cluster` is
    /// an id or a name.
    pub fn new(base: &str, cluster: &str, token: Option<&str>) -> Remote {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(REQUEST_TIMEOUT))
            .http_status_as_error(false)
            .build();
        Remote {
            base: base.trim_end_matches('/').to_owned(),
            cluster: cluster.to_owned(),
            token: token.map(str::to_owned),
            agent: ureq::Agent::new_with_config(config),
            id: std::sync::OnceLock::new(),
        }
    }

    fn authorization(&self) -> Option<String> {
        self.token.as_ref().map(|t| format!("Bearer {t}"))
    }

    /// The answer's body, or an error with the server's status and body.
    fn read(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Vec<u8>, DecideError> {
        let mut response = response.map_err(|e| DecideError::Remote(e.to_string()))?;
        let status = response.status();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec()
            .map_err(|e| DecideError::Remote(e.to_string()))?;
        if !status.is_success() {
            return Err(DecideError::Remote(format!(
                "{status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        Ok(body)
    }

    /// The cluster's id: as given when it is a UUID, else looked up.
    fn cluster_id(&self) -> Result<String, DecideError> {
        if let Some(id) = self.id.get() {
            return Ok(id.clone());
        }
        let id = if uuid::Uuid::parse_str(&self.cluster).is_ok() {
            self.cluster.clone()
        } else {
            let mut request = self.agent.get(format!("{}/api/v1/clusters", self.base));
            if let Some(auth) = self.authorization() {
                request = request.header("Authorization", auth);
            }
            let body = self.read(request.call())?;
            let clusters: Vec<ClusterItem> = serde_json::from_slice(&body)
                .map_err(|e| DecideError::Remote(format!("the cluster list: {e}")))?;
            clusters
                .into_iter()
                .find(|c| c.name.eq_ignore_ascii_case(&self.cluster))
                .map(|c| c.id)
                .ok_or_else(|| DecideError::Remote(format!("no cluster `{}`", self.cluster)))?
        };
        Ok(self.id.get_or_init(|| id).clone())
    }
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
        let body = serde_json::to_vec(&body).map_err(|e| DecideError::Remote(e.to_string()))?;
        let mut request = self
            .agent
            .post(format!("{}/api/v1/clusters/{id}/schedule", self.base))
            .header("Content-Type", "application/json");
        if let Some(auth) = self.authorization() {
            request = request.header("Authorization", auth);
        }
        let answer = self.read(request.send(&body[..]))?;
        let answer: Answer = serde_json::from_slice(&answer)
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
