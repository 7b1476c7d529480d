//! kube-scheduler's extender protocol (`k8s.io/kube-scheduler/extender/v1`)
//! as a thin translation onto the one decision: the pod becomes the VM to
//! place ([`translate::pod_to_vm`]), the candidate nodes become hosts (sent
//! whole and translated, [`translate::node_to_host`], or named and taken
//! from the cluster's held inventory), the cluster's policy decides with
//! `pipeline::schedule` exactly as for `POST .../schedule`, and the
//! decision's explain record is read back as the protocol's answers:
//! [`Judged::filter_result`] and [`Judged::priorities`]. The routes are
//! `api::extender`; docs/kubernetes.md says how to connect kube-scheduler.
//!
//! Nothing is claimed: kube-scheduler binds the pod itself, after its own
//! plugins and every extender have had their say, so a claim made here
//! would hold capacity for a pod that may go elsewhere.

pub mod quantity;
pub mod translate;
pub mod wire;

use serde::Deserialize;
use serde_json::Value;

use self::translate::{TranslateError, node_to_host, pod_to_vm};
use self::wire::{
    ExtenderArgs, ExtenderFilterResult, FailedNodesMap, HostPriority, MAX_EXTENDER_PRIORITY, Node,
    NodeItems,
};
use crate::pipeline::Decision;
use crate::snapshot::{Snapshot, VmSpec};
use sandpiper_model::HostStatus;

/// Why a request cannot be decided, before any policy runs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgsError {
    #[error("`Pod` is required")]
    NoPod,
    #[error(
        "either `NodeNames` (nodeCacheCapable: true) or `Nodes` (nodeCacheCapable: false) is \
         required, not both"
    )]
    NodesSource,
    #[error("{path}: {message}")]
    Node { path: String, message: String },
    #[error(transparent)]
    Translate(#[from] TranslateError),
}

/// Where the candidate hosts come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Candidates {
    /// Named (`nodeCacheCapable: true`): hosts of the held inventory.
    Held { names: Vec<String> },
    /// Sent whole (`nodeCacheCapable: false`): the translated snapshot,
    /// and each node as sent, to be returned as sent.
    Inline {
        snapshot: Snapshot,
        items: Vec<Value>,
    },
}

/// An extender request, translated: the VM to place and its candidates.
#[derive(Clone, Debug, PartialEq)]
pub struct Translated {
    pub vm: VmSpec,
    pub candidates: Candidates,
}

/// Translates `ExtenderArgs`.
pub fn translate(args: ExtenderArgs) -> Result<Translated, ArgsError> {
    let pod = args.pod.ok_or(ArgsError::NoPod)?;
    let vm = pod_to_vm(&pod)?;
    let candidates = match (args.node_names, args.nodes) {
        (Some(names), None) => Candidates::Held { names },
        (None, Some(list)) => {
            let mut hosts = Vec::with_capacity(list.items.len());
            for (i, item) in list.items.iter().enumerate() {
                let path = format!("Nodes.items[{i}]");
                let node = Node::deserialize(item).map_err(|e| ArgsError::Node {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                hosts.push(node_to_host(&node, &path)?);
            }
            Candidates::Inline {
                snapshot: Snapshot {
                    hosts,
                    vms: Vec::new(),
                },
                items: list.items,
            }
        }
        _ => return Err(ArgsError::NodesSource),
    };
    Ok(Translated { vm, candidates })
}

/// A decision over an extender request's candidates, with what the
/// protocol's answers need besides it.
pub struct Judged {
    pub decision: Decision,
    /// Every node asked about, in the order asked, without repeats.
    pub asked: Vec<String>,
    /// The nodes the held inventory does not hold (always empty for nodes
    /// sent whole).
    pub unknown: Vec<String>,
    /// The nodes as sent, by name, when they were sent whole.
    pub items: Option<Vec<(String, Value)>>,
}

/// A node the held inventory does not hold: no preemption changes that, so
/// it is unresolvable.
pub const UNKNOWN_NODE: &str = "not in the cluster's held inventory (push it with PUT \
                                /api/v1/clusters/{id}/inventory)";

impl Judged {
    /// The answer to `filter`: the survivors of the policy's filters; every
    /// other node with the first filter that rejected it and its reason
    /// (`"<unit>: <reason>"`). A node rejected while its host is not up
    /// (a `NotReady` node is down, a cordoned one disabled) is
    /// unresolvable: evicting pods does not make it ready or uncordon it,
    /// so kube-scheduler must not preempt there. A node rejected while up
    /// (capacity, labels, affinity) may be helped by preemption. Unknown
    /// nodes are unresolvable.
    pub fn filter_result(&self) -> ExtenderFilterResult {
        let explain = &self.decision.explain;
        let statuses = explain.inventory.0.host_statuses();
        let mut failed = FailedNodesMap::new();
        let mut unresolvable = FailedNodesMap::new();
        for (unit, reason, hosts) in explain.rejections() {
            for host in hosts {
                let name = explain.host_id(host);
                let up = statuses.get(host as usize) == Some(&HostStatus::Up);
                let map = if up { &mut failed } else { &mut unresolvable };
                map.entry(name)
                    .or_insert_with(|| format!("{unit}: {reason}"));
            }
        }
        for name in &self.unknown {
            unresolvable.insert(name.clone(), UNKNOWN_NODE.to_owned());
        }
        let passed: std::collections::HashSet<String> = self
            .decision
            .ranked
            .iter()
            .map(|r| explain.host_id(r.host))
            .collect();
        let mut result = ExtenderFilterResult {
            failed_nodes: failed,
            failed_and_unresolvable_nodes: unresolvable,
            ..ExtenderFilterResult::default()
        };
        match &self.items {
            Some(items) => {
                result.nodes = Some(NodeItems {
                    items: items
                        .iter()
                        .filter(|(name, _)| passed.contains(name))
                        .map(|(_, item)| item.clone())
                        .collect(),
                });
            }
            None => {
                result.node_names = Some(
                    self.asked
                        .iter()
                        .filter(|name| passed.contains(*name))
                        .cloned()
                        .collect(),
                );
            }
        }
        result
    }

    /// The answer to `prioritize`: every node asked about, in the order
    /// asked, scored by [`scores`] from the policy's ranking; a node the
    /// policy's filters reject, or the inventory does not hold, scores 0.
    pub fn priorities(&self) -> Vec<HostPriority> {
        let explain = &self.decision.explain;
        let totals: Vec<f64> = self.decision.ranked.iter().map(|r| r.total).collect();
        let by_name: std::collections::HashMap<String, i64> = self
            .decision
            .ranked
            .iter()
            .zip(scores(&totals))
            .map(|(r, score)| (explain.host_id(r.host), score))
            .collect();
        self.asked
            .iter()
            .map(|name| HostPriority {
                host: name.clone(),
                score: by_name.get(name).copied().unwrap_or(0),
            })
            .collect()
    }
}

/// Extender scores (0 to 10) for a ranking's totals, best first: equal
/// totals (ties) get equal scores; with at most eleven distinct totals the
/// best gets 10, the next distinct total 9, and so on (the order kept
/// exactly, the gaps between totals not); with more, the distinct totals
/// are cut into eleven bands of (nearly) equal numbers of distinct totals,
/// 10 for the best band down to 0 for the worst, so the order is kept
/// between bands and only neighbours within a band share a score. A
/// single survivor, or survivors all tied, score 10.
pub fn scores(ranked_totals: &[f64]) -> Vec<i64> {
    // Dense rank: how many distinct totals come before each one.
    let mut ranks = Vec::with_capacity(ranked_totals.len());
    let mut rank = 0usize;
    for (i, total) in ranked_totals.iter().enumerate() {
        if i > 0 && ranked_totals[i - 1] != *total {
            rank += 1;
        }
        ranks.push(rank);
    }
    let distinct = rank + 1;
    let levels = (MAX_EXTENDER_PRIORITY + 1) as usize;
    ranks
        .into_iter()
        .map(|r| {
            let band = if distinct <= levels {
                r
            } else {
                r * levels / distinct
            };
            MAX_EXTENDER_PRIORITY - band as i64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_keep_the_order_and_give_ties_one_score() {
        assert_eq!(scores(&[]), Vec::<i64>::new());
        assert_eq!(scores(&[0.0]), vec![10]);
        assert_eq!(scores(&[3.0, 3.0, 3.0]), vec![10, 10, 10]);
        assert_eq!(scores(&[9.0, 7.5, 7.5, 1.0]), vec![10, 9, 9, 8]);
        // Eleven distinct totals: every one its own score, 10 down to 0.
        let eleven: Vec<f64> = (0..11).map(|i| f64::from(20 - i)).collect();
        assert_eq!(scores(&eleven), (0..=10).rev().collect::<Vec<i64>>());
        // More: bands, never out of order, the ends at 10 and 0.
        let many: Vec<f64> = (0..100).map(|i| f64::from(1000 - i)).collect();
        let s = scores(&many);
        assert_eq!((s[0], s[99]), (10, 0));
        assert!(s.windows(2).all(|w| w[0] >= w[1]));
        assert!((0..=10).all(|v| s.contains(&v)), "every score used: {s:?}");
    }

    #[test]
    fn a_request_names_its_nodes_or_sends_them_never_both() {
        let args = |json: serde_json::Value| -> ExtenderArgs {
            serde_json::from_value(json).expect("args")
        };
        let pod = serde_json::json!({"metadata": {"name": "p", "namespace": "ns"}});
        let held = translate(args(
            serde_json::json!({"Pod": pod, "Nodes": null, "NodeNames": ["a", "b"]}),
        ))
        .expect("translated");
        assert_eq!(
            held.candidates,
            Candidates::Held {
                names: vec!["a".to_owned(), "b".to_owned()]
            }
        );
        // Go's decoder is case-insensitive; so is this one, for these keys.
        let lower = translate(args(serde_json::json!({"pod": pod, "nodes": {"items": [
            {"metadata": {"name": "n"}}
        ]}})))
        .expect("translated");
        assert!(
            matches!(lower.candidates, Candidates::Inline { ref snapshot, .. } if snapshot.hosts[0].id == "n")
        );
        assert_eq!(
            translate(args(serde_json::json!({"Pod": pod}))),
            Err(ArgsError::NodesSource)
        );
        assert_eq!(
            translate(args(serde_json::json!({"NodeNames": []}))),
            Err(ArgsError::NoPod)
        );
    }
}
