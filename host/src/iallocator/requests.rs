//! Each request type answered through picks ([`Decide`]) over the
//! translated cluster, in the result shapes of `doc/iallocator.rst` and
//! `doc/design-multi-reloc.rst`. Where the protocol leaves a choice open,
//! this module decides as docs/ganeti.md says:
//!
//! * Groups: a new instance goes to a `preferred` group if one can take
//!   it, else a `last_resort` one, never an `unallocable` one; within a
//!   tier the policy's best node decides the group. A mirrored instance's
//!   secondary is in its primary's group. A group whose instance policy
//!   (`ipolicy`: disk templates, min/max specs) refuses the instance is
//!   left out, its nodes counted as refused.
//! * A secondary (DRBD) must fit the whole instance, not only its disk:
//!   it becomes the primary on failover (hail's soft N+1 check, made hard).
//! * Evacuations and relocations stay in the instance's group; group
//!   changes follow the allocation's rules in the target groups.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::decide::{Decide, DecideError, Pick};
use super::translate::{Cluster, Need, Role};
use super::wire::{
    AllocPolicy, Allocate, ChangeGroup, Envelope, EvacMode, InputError, NodeEvacuate, Relocate,
    Request,
};

/// How many primaries a two-node allocation tries before giving up on a
/// tier: each try costs two picks, and a primary whose group has no room
/// for a secondary is rare, so a few cover it without a pick per node.
pub const MAX_PRIMARY_TRIES: usize = 8;

/// hail's failure modes for the filter units whose refusals mean the same
/// thing (`FailMode` in Ganeti's `HTools/Types.hs`); a unit not listed is
/// counted under its own name.
const FAIL_MODES: &[(&str, &str)] = &[
    ("RamFilter", "FailMem"),
    ("AggregateRamFilter", "FailMem"),
    ("Memory", "FailMem"),
    ("Swap", "FailMem"),
    ("DiskFilter", "FailDisk"),
    ("AggregateDiskFilter", "FailDisk"),
    ("CoreFilter", "FailCPU"),
    ("AggregateCoreFilter", "FailCPU"),
    ("CPU", "FailCPU"),
    ("CPUOverloaded", "FailCPU"),
    ("CPUTopology", "FailCPU"),
];

/// Why a request could not be answered (beyond: no node fits).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Decide(#[from] DecideError),
}

/// Refusals counted per failure mode, over every pick of a request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally(BTreeMap<String, usize>);

impl Tally {
    fn count(&mut self, mode: &str, nodes: usize) {
        if nodes > 0 {
            *self.0.entry(mode.to_owned()).or_default() += nodes;
        }
    }

    fn add(&mut self, pick: &Pick) {
        for (unit, &count) in &pick.refused {
            let mode = FAIL_MODES
                .iter()
                .find(|(name, _)| *name == unit.as_str())
                .map_or(unit.as_str(), |(_, mode)| *mode);
            *self.0.entry(mode.to_owned()).or_default() += count;
        }
    }
}

impl std::fmt::Display for Tally {
    /// `FailMem: 3, FailDisk: 1`, as hail writes them; `none` when empty.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self.0.iter().map(|(m, n)| format!("{m}: {n}")).collect();
        f.write_str(&parts.join(", "))
    }
}

/// Answers a request.
pub fn answer(
    cluster: &mut Cluster,
    request: &Request,
    decide: &dyn Decide,
) -> Result<Envelope, RequestError> {
    match request {
        Request::Allocate(a) => allocate(cluster, a, decide),
        Request::MultiAllocate(all) => multi_allocate(cluster, all, decide),
        Request::Relocate(r) => relocate(cluster, r, decide),
        Request::NodeEvacuate(e) => node_evacuate(cluster, e, decide),
        Request::ChangeGroup(c) => change_group(cluster, c, decide),
    }
}

/// Where a new instance went, or why it could not.
enum Placed {
    At { group: String, nodes: Vec<String> },
    Nowhere(String),
}

fn required(required_nodes: u32, path: &str) -> Result<u32, InputError> {
    match required_nodes {
        1 | 2 => Ok(required_nodes),
        n => Err(InputError::Key {
            path: path.to_owned(),
            message: format!("required_nodes must be 1 or 2, not {n}"),
        }),
    }
}

fn allocate(
    cluster: &mut Cluster,
    request: &Allocate,
    decide: &dyn Decide,
) -> Result<Envelope, RequestError> {
    let required = required(request.required_nodes, "request.required_nodes")?;
    let need = Need::of_request(request);
    let groups = cluster.group_ids();
    let mut tally = Tally::default();
    Ok(
        match place_new(cluster, &need, required, &groups, decide, &mut tally)? {
            Placed::At { group, nodes } => Envelope {
                success: true,
                info: format!(
                    "Request successful: Selected group: {}, failure reasons: {tally}",
                    cluster.group_name(&group)
                ),
                result: json!(nodes),
            },
            Placed::Nowhere(why) => {
                Envelope::failed(format!("Request failed: {why}, failure reasons: {tally}"))
            }
        },
    )
}

fn multi_allocate(
    cluster: &mut Cluster,
    all: &[Allocate],
    decide: &dyn Decide,
) -> Result<Envelope, RequestError> {
    let groups = cluster.group_ids();
    let mut placed = Vec::new();
    let mut failed = Vec::new();
    let mut tally = Tally::default();
    for (i, request) in all.iter().enumerate() {
        let required = required(
            request.required_nodes,
            &format!("request.instances[{i}].required_nodes"),
        )?;
        let need = Need::of_request(request);
        match place_new(cluster, &need, required, &groups, decide, &mut tally)? {
            Placed::At { nodes, .. } => placed.push(json!([request.name, nodes])),
            Placed::Nowhere(_) => failed.push(json!(request.name)),
        }
    }
    Ok(Envelope {
        success: true,
        info: format!(
            "Request successful: {} instances allocated, {} failed, failure reasons: {tally}",
            placed.len(),
            failed.len()
        ),
        result: json!([placed, failed]),
    })
}

/// Places a new instance (and applies it to `cluster`) in one of
/// `groups`, by allocation policy tier.
fn place_new(
    cluster: &mut Cluster,
    need: &Need,
    required: u32,
    groups: &[String],
    decide: &dyn Decide,
    tally: &mut Tally,
) -> Result<Placed, DecideError> {
    let mut why = "Can't find a suitable node for position 1 (already selected: )".to_owned();
    for tier in [AllocPolicy::Preferred, AllocPolicy::LastResort] {
        let mut open = Vec::new();
        for group in groups.iter().filter(|g| cluster.alloc_policy(g) == tier) {
            let nodes = cluster.usable_in(group);
            match cluster.refused_by_group(group, need) {
                Some(mode) => tally.count(mode, nodes.len()),
                None => open.extend(nodes),
            }
        }
        for _ in 0..MAX_PRIMARY_TRIES {
            if open.is_empty() {
                break;
            }
            let pick = decide.pick(&cluster.snapshot, &need.vm(), &open)?;
            tally.add(&pick);
            let Some(primary) = pick.chosen else {
                why = "Can't find a suitable node for position 1 (already selected: )".to_owned();
                break;
            };
            let group = cluster.group_of(&primary).unwrap_or_default().to_owned();
            if required == 1 {
                cluster.place(&primary, need, Role::Primary);
                return Ok(Placed::At {
                    group,
                    nodes: vec![primary],
                });
            }
            let others: Vec<String> = cluster
                .usable_in(&group)
                .into_iter()
                .filter(|n| *n != primary)
                .collect();
            let second = if others.is_empty() {
                Pick::default()
            } else {
                decide.pick(&cluster.snapshot, &need.vm(), &others)?
            };
            tally.add(&second);
            if let Some(secondary) = second.chosen {
                cluster.place(&primary, need, Role::Primary);
                cluster.place(&secondary, need, Role::Secondary);
                return Ok(Placed::At {
                    group,
                    nodes: vec![primary, secondary],
                });
            }
            why =
                format!("Can't find a suitable node for position 2 (already selected: {primary})");
            open.retain(|n| *n != primary);
        }
    }
    Ok(Placed::Nowhere(why))
}

fn relocate(
    cluster: &mut Cluster,
    request: &Relocate,
    decide: &dyn Decide,
) -> Result<Envelope, RequestError> {
    required(request.required_nodes, "request.required_nodes")?;
    let instance = cluster
        .instances
        .get(&request.name)
        .ok_or_else(|| InputError::Key {
            path: "request.name".to_owned(),
            message: format!("unknown instance `{}`", request.name),
        })?;
    let need = Need::of_instance(&request.name, instance);
    let nodes = instance.nodes.clone();
    if !need.mirrored_internally() || nodes.len() != 2 {
        return Ok(Envelope::failed(format!(
            "Request failed: only DRBD instances can be relocated, and `{}` is `{}`",
            request.name, need.disk_template
        )));
    }
    let mut tally = Tally::default();
    match new_node(cluster, &need, &nodes, &[], decide, &mut tally)? {
        Some(node) => {
            cluster.place(&node, &need, Role::Secondary);
            cluster.remove(&nodes[1], &need, Role::Secondary);
            Ok(Envelope {
                success: true,
                info: format!("Request successful: failure reasons: {tally}"),
                result: json!([node]),
            })
        }
        None => Ok(Envelope::failed(format!(
            "Request failed: Can't find a suitable new secondary for `{}`, failure reasons: {tally}",
            request.name
        ))),
    }
}

/// A node of the instance's primary's group for it, not one of `avoid`
/// nor `also`.
fn new_node(
    cluster: &Cluster,
    need: &Need,
    avoid: &[String],
    also: &[String],
    decide: &dyn Decide,
    tally: &mut Tally,
) -> Result<Option<String>, DecideError> {
    let group = avoid
        .first()
        .and_then(|p| cluster.group_of(p))
        .unwrap_or_default()
        .to_owned();
    let candidates: Vec<String> = cluster
        .usable_in(&group)
        .into_iter()
        .filter(|n| !avoid.contains(n) && !also.contains(n))
        .collect();
    if candidates.is_empty() {
        return Ok(None);
    }
    let pick = decide.pick(&cluster.snapshot, &need.vm(), &candidates)?;
    tally.add(&pick);
    Ok(pick.chosen)
}

/// The moves of a node evacuation or a group change, as
/// `doc/design-multi-reloc.rst` gives them: `[moved, failed, jobs]`.
#[derive(Default)]
struct Moves {
    moved: Vec<Value>,
    failed: Vec<Value>,
    jobs: Vec<Value>,
    tally: Tally,
}

impl Moves {
    fn envelope(self) -> Envelope {
        Envelope {
            success: true,
            info: format!(
                "Request successful: {} instances failed to move and {} were moved successfully, \
                 failure reasons: {}",
                self.failed.len(),
                self.moved.len(),
                self.tally
            ),
            result: json!([self.moved, self.failed, self.jobs]),
        }
    }
}

fn migrate(instance: &str, target: Option<&str>) -> Value {
    let mut op = json!({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": instance,
                        "allow_failover": true});
    if let Some(target) = target {
        op["target_node"] = json!(target);
    }
    op
}

fn replace_secondary(instance: &str, node: &str) -> Value {
    json!({"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": instance,
           "mode": "replace_new_secondary", "remote_node": node, "disks": []})
}

/// The instance a move request names, or an input error naming it.
fn named(cluster: &Cluster, name: &str, path: String) -> Result<(Need, Vec<String>), InputError> {
    let instance = cluster.instances.get(name).ok_or_else(|| InputError::Key {
        path,
        message: format!("unknown instance `{name}`"),
    })?;
    Ok((Need::of_instance(name, instance), instance.nodes.clone()))
}

fn node_evacuate(
    cluster: &mut Cluster,
    request: &NodeEvacuate,
    decide: &dyn Decide,
) -> Result<Envelope, RequestError> {
    let mut moves = Moves::default();
    for (i, name) in request.instances.iter().enumerate() {
        let (need, nodes) = named(cluster, name, format!("request.instances[{i}]"))?;
        match evacuate_one(
            cluster,
            &need,
            &nodes,
            request.evac_mode,
            decide,
            &mut moves.tally,
        )? {
            Ok((new_nodes, ops)) => {
                let group = nodes
                    .first()
                    .and_then(|p| cluster.group_of(p))
                    .map(|g| cluster.group_name(g).to_owned())
                    .unwrap_or_default();
                moves.moved.push(json!([name, group, new_nodes]));
                moves.jobs.push(json!(ops));
            }
            Err(why) => moves.failed.push(json!([name, why])),
        }
    }
    Ok(moves.envelope())
}

/// One instance off its nodes, within its group: its new nodes and the
/// opcodes that move it, or why it cannot move.
type Moved = Result<(Vec<String>, Vec<Value>), String>;

fn evacuate_one(
    cluster: &mut Cluster,
    need: &Need,
    nodes: &[String],
    mode: EvacMode,
    decide: &dyn Decide,
    tally: &mut Tally,
) -> Result<Moved, DecideError> {
    let name = need.name.as_str();
    let template = need.disk_template.as_str();
    let Some(primary) = nodes.first() else {
        return Ok(Err(format!("Instance {name} has no nodes")));
    };
    if need.mirrored_externally() {
        if mode == EvacMode::SecondaryOnly {
            return Ok(Err(format!(
                "Instances with disk template '{template}' can't execute change secondary"
            )));
        }
        return Ok(match new_node(cluster, need, nodes, &[], decide, tally)? {
            Some(target) => {
                cluster.remove(primary, need, Role::Primary);
                cluster.place(&target, need, Role::Primary);
                Ok((vec![target.clone()], vec![migrate(name, Some(&target))]))
            }
            None => Err(format!("No node can take {name}")),
        });
    }
    if !need.mirrored_internally() || nodes.len() != 2 {
        return Ok(Err(format!(
            "Instances of type {template} cannot be relocated"
        )));
    }
    let secondary = &nodes[1];
    Ok(match mode {
        EvacMode::PrimaryOnly => {
            let pick = decide.pick(
                &cluster.snapshot,
                &need.vm(),
                std::slice::from_ref(secondary),
            )?;
            tally.add(&pick);
            if pick.chosen.is_none() {
                return Ok(Err(format!(
                    "The secondary {secondary} cannot run {name} (failover refused)"
                )));
            }
            cluster.remove(primary, need, Role::Primary);
            cluster.place(primary, need, Role::Secondary);
            cluster.remove(secondary, need, Role::Secondary);
            cluster.place(secondary, need, Role::Primary);
            Ok((
                vec![secondary.clone(), primary.clone()],
                vec![migrate(name, None)],
            ))
        }
        EvacMode::SecondaryOnly => match new_node(cluster, need, nodes, &[], decide, tally)? {
            Some(node) => {
                cluster.remove(secondary, need, Role::Secondary);
                cluster.place(&node, need, Role::Secondary);
                Ok((
                    vec![primary.clone(), node.clone()],
                    vec![replace_secondary(name, &node)],
                ))
            }
            None => Err(format!("No node can be the new secondary of {name}")),
        },
        EvacMode::All => {
            let Some(first) = new_node(cluster, need, nodes, &[], decide, tally)? else {
                return Ok(Err(format!("No node can be the new primary of {name}")));
            };
            let Some(second) = new_node(
                cluster,
                need,
                nodes,
                std::slice::from_ref(&first),
                decide,
                tally,
            )?
            else {
                return Ok(Err(format!("No node can be the new secondary of {name}")));
            };
            cluster.remove(primary, need, Role::Primary);
            cluster.remove(secondary, need, Role::Secondary);
            cluster.place(&first, need, Role::Primary);
            cluster.place(&second, need, Role::Secondary);
            Ok((
                vec![first.clone(), second.clone()],
                vec![
                    replace_secondary(name, &first),
                    migrate(name, None),
                    replace_secondary(name, &second),
                ],
            ))
        }
    })
}

fn change_group(
    cluster: &mut Cluster,
    request: &ChangeGroup,
    decide: &dyn Decide,
) -> Result<Envelope, RequestError> {
    let mut moves = Moves::default();
    for (i, name) in request.instances.iter().enumerate() {
        let (need, nodes) = named(cluster, name, format!("request.instances[{i}]"))?;
        let current = nodes
            .first()
            .and_then(|p| cluster.group_of(p))
            .unwrap_or_default()
            .to_owned();
        if !need.mirrored_internally() || nodes.len() != 2 {
            moves.failed.push(json!([
                name,
                format!(
                    "Instances of type {} cannot change group (only DRBD instances can)",
                    need.disk_template
                )
            ]));
            continue;
        }
        // The named groups, else every other group; by allocation policy
        // either way (an `unallocable` group takes nothing).
        let targets: Vec<String> = if request.target_groups.is_empty() {
            cluster
                .group_ids()
                .into_iter()
                .filter(|g| *g != current)
                .collect()
        } else {
            request.target_groups.clone()
        };
        match place_new(cluster, &need, 2, &targets, decide, &mut moves.tally)? {
            Placed::At { group, nodes: new } => {
                cluster.remove(&nodes[0], &need, Role::Primary);
                cluster.remove(&nodes[1], &need, Role::Secondary);
                moves.jobs.push(json!([
                    replace_secondary(name, &new[0]),
                    migrate(name, None),
                    replace_secondary(name, &new[1]),
                ]));
                moves
                    .moved
                    .push(json!([name, cluster.group_name(&group), new]));
            }
            Placed::Nowhere(why) => moves.failed.push(json!([name, why])),
        }
    }
    Ok(moves.envelope())
}
