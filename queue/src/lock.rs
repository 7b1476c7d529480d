//! What an operation declares it will lock, and when two declarations are
//! known to conflict.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A declaration may name at most this many resources per level. It bounds
/// what one pending operation costs the picker (its names are looked up on
/// every pick) and what one operation adds to [`crate::Running`]; an
/// operation touching more than this should declare `all_*` instead.
pub const MAX_NAMES_PER_LEVEL: usize = 1_000;

/// A lock level. Ganeti has five, taken in this order, plus the Big
/// Ganeti Lock; ours map one to one so that its table and heuristic carry
/// over unchanged:
///
/// | Ganeti | ours |
/// |---|---|
/// | NodeGroup | `HostGroup` |
/// | Instance | `Vm` |
/// | Node | `Host` |
/// | NodeRes | `HostResources` |
/// | Network | `Network` |
/// | BGL (exclusive) | [`Locks::cluster`] |
///
/// `Host` is the host itself (its configuration, maintenance), and
/// `HostResources` its capacity (memory, CPU): a migration locks its two
/// hosts' resources, not the hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    HostGroup,
    Vm,
    Host,
    HostResources,
    Network,
}

impl Level {
    /// Every level, in Ganeti's acquisition order.
    pub const ALL: [Level; 5] = [
        Level::HostGroup,
        Level::Vm,
        Level::Host,
        Level::HostResources,
        Level::Network,
    ];

    /// The level's name in JSON and in errors.
    pub fn name(self) -> &'static str {
        match self {
            Level::HostGroup => "host_group",
            Level::Vm => "vm",
            Level::Host => "host",
            Level::HostResources => "host_resources",
            Level::Network => "network",
        }
    }

    /// Position in [`Level::ALL`], for per-level arrays.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One level's declaration, Ganeti's seven lock types. JSON (externally
/// tagged, snake_case): `"none"`, `{"shared": ["a","b"]}`,
/// `"unknown_shared"`, `"all_shared"`, `{"exclusive": ["a"]}`,
/// `"unknown_exclusive"`, `"all_exclusive"`.
///
/// `Unknown*` means "at least one lock at this level, which ones cannot be
/// told before the operation runs" (an engine that picks the destination
/// host itself); it weighs as "might block" and never counts as a known
/// conflict.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lock {
    /// Nothing at this level.
    #[default]
    None,
    /// These names, shared.
    Shared(BTreeSet<String>),
    /// At least one name, shared; which is not known.
    UnknownShared,
    /// Every name at this level, shared.
    AllShared,
    /// These names, exclusive.
    Exclusive(BTreeSet<String>),
    /// At least one name, exclusive; which is not known.
    UnknownExclusive,
    /// Every name at this level, exclusive.
    AllExclusive,
}

/// A [`Lock`] without its names: the row or column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    None,
    Shared,
    UnknownShared,
    AllShared,
    Exclusive,
    UnknownExclusive,
    AllExclusive,
}

impl Kind {
    pub(crate) const ALL: [Kind; 7] = [
        Kind::None,
        Kind::Shared,
        Kind::UnknownShared,
        Kind::AllShared,
        Kind::Exclusive,
        Kind::UnknownExclusive,
        Kind::AllExclusive,
    ];
    pub(crate) const COUNT: usize = Kind::ALL.len();

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    fn is_exclusive(self) -> bool {
        matches!(
            self,
            Kind::Exclusive | Kind::UnknownExclusive | Kind::AllExclusive
        )
    }

    fn is_all(self) -> bool {
        matches!(self, Kind::AllShared | Kind::AllExclusive)
    }

    pub(crate) fn is_named(self) -> bool {
        matches!(self, Kind::Shared | Kind::Exclusive)
    }

    /// Whether two holders of these kinds are known to conflict: both hold
    /// something, one of them exclusively, and their sets are known to
    /// meet (one is `All*`, or both are named sets that `overlap`, asked
    /// only then). `Unknown*` against a named or unknown set is not known
    /// to meet, so it is not a conflict (the seed lets them run together
    /// and weighs them as "might block" instead).
    pub(crate) fn conflict(a: Kind, b: Kind, overlap: impl FnOnce() -> bool) -> bool {
        if a == Kind::None || b == Kind::None || !(a.is_exclusive() || b.is_exclusive()) {
            return false;
        }
        a.is_all() || b.is_all() || (a.is_named() && b.is_named() && overlap())
    }
}

impl Lock {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Lock::None => Kind::None,
            Lock::Shared(_) => Kind::Shared,
            Lock::UnknownShared => Kind::UnknownShared,
            Lock::AllShared => Kind::AllShared,
            Lock::Exclusive(_) => Kind::Exclusive,
            Lock::UnknownExclusive => Kind::UnknownExclusive,
            Lock::AllExclusive => Kind::AllExclusive,
        }
    }

    /// The named set of `Shared` and `Exclusive`; `None` for the others.
    pub fn names(&self) -> Option<&BTreeSet<String>> {
        match self {
            Lock::Shared(names) | Lock::Exclusive(names) => Some(names),
            _ => None,
        }
    }

    /// Whether both are named sets sharing a name.
    pub(crate) fn overlaps(&self, other: &Lock) -> bool {
        match (self.names(), other.names()) {
            (Some(a), Some(b)) => {
                let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
                small.iter().any(|name| large.contains(name))
            }
            _ => false,
        }
    }
}

/// An operation's declarations. JSON: `{"cluster": false, "host_group":
/// ..., "vm": ..., "host": ..., "host_resources": ..., "network": ...}`,
/// every field optional (`cluster` false, levels `"none"`), unknown fields
/// rejected so that a misspelt level is not read as "no lock".
///
/// `cluster` is Ganeti's BGL taken exclusively: the operation runs alone,
/// and its levels are not looked at.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Locks {
    pub cluster: bool,
    pub host_group: Lock,
    pub vm: Lock,
    pub host: Lock,
    pub host_resources: Lock,
    pub network: Lock,
}

impl Locks {
    /// The whole cluster (Ganeti's BGL): the worst weight, and conflicts
    /// with everything. What the host assumes for an operation that
    /// declares nothing.
    pub fn cluster_wide() -> Locks {
        Locks {
            cluster: true,
            ..Locks::default()
        }
    }

    pub fn level(&self, level: Level) -> &Lock {
        match level {
            Level::HostGroup => &self.host_group,
            Level::Vm => &self.vm,
            Level::Host => &self.host,
            Level::HostResources => &self.host_resources,
            Level::Network => &self.network,
        }
    }

    pub fn level_mut(&mut self, level: Level) -> &mut Lock {
        match level {
            Level::HostGroup => &mut self.host_group,
            Level::Vm => &mut self.vm,
            Level::Host => &mut self.host,
            Level::HostResources => &mut self.host_resources,
            Level::Network => &mut self.network,
        }
    }

    pub fn set(&mut self, level: Level, lock: Lock) {
        *self.level_mut(level) = lock;
    }

    /// Builder form of [`Locks::set`].
    pub fn with(mut self, level: Level, lock: Lock) -> Locks {
        self.set(level, lock);
        self
    }

    /// Checks what serde cannot: a named set is not empty (an empty one
    /// would mean `none` while saying otherwise), has at most
    /// [`MAX_NAMES_PER_LEVEL`] names, and no name is empty. The first
    /// problem found, in level order, names its level.
    pub fn validate(&self) -> Result<(), LockError> {
        for level in Level::ALL {
            let Some(names) = self.level(level).names() else {
                continue;
            };
            let kind = if names.is_empty() {
                LockErrorKind::EmptySet
            } else if names.len() > MAX_NAMES_PER_LEVEL {
                LockErrorKind::TooManyNames
            } else if names.iter().any(String::is_empty) {
                LockErrorKind::EmptyName
            } else {
                continue;
            };
            return Err(LockError::new(level, kind, names.len()));
        }
        Ok(())
    }
}

/// What is wrong with a declaration, for callers that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockErrorKind {
    EmptySet,
    TooManyNames,
    EmptyName,
}

/// A declaration [`Locks::validate`] refuses, with the level at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("locks at level `{level}`: {message}")]
pub struct LockError {
    pub level: Level,
    pub kind: LockErrorKind,
    pub message: String,
}

impl LockError {
    fn new(level: Level, kind: LockErrorKind, names: usize) -> LockError {
        let message = match kind {
            LockErrorKind::EmptySet => {
                "a named set must name at least one resource (or say \"none\")".to_owned()
            }
            LockErrorKind::TooManyNames => {
                format!(
                    "{names} names, more than the {MAX_NAMES_PER_LEVEL} allowed (declare all_shared or all_exclusive)"
                )
            }
            LockErrorKind::EmptyName => "a resource name is empty".to_owned(),
        };
        LockError {
            level,
            kind,
            message,
        }
    }
}

/// Whether two operations' *known* locks conflict, so that they must never
/// run at once: either is cluster-wide, or at some level both hold a lock,
/// at least one exclusively, and their sets are known to meet (either is
/// `All*`, or both are named sets sharing a name). `Unknown*` against a
/// named or unknown set is not known to meet: not a conflict, as in the
/// seed, where such a pair may run together and might then wait.
pub fn conflicts(a: &Locks, b: &Locks) -> bool {
    a.cluster
        || b.cluster
        || Level::ALL.iter().any(|&level| {
            let (x, y) = (a.level(level), b.level(level));
            Kind::conflict(x.kind(), y.kind(), || x.overlaps(y))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn level_names_match_serde() {
        for level in Level::ALL {
            let json = serde_json::to_string(&level).unwrap();
            assert_eq!(json, format!("\"{}\"", level.name()));
            assert_eq!(Level::ALL[level.index()], level);
        }
    }

    #[test]
    fn kinds_follow_the_variants() {
        let locks = [
            Lock::None,
            Lock::Shared(named(&["a"])),
            Lock::UnknownShared,
            Lock::AllShared,
            Lock::Exclusive(named(&["a"])),
            Lock::UnknownExclusive,
            Lock::AllExclusive,
        ];
        for (lock, kind) in locks.iter().zip(Kind::ALL) {
            assert_eq!(lock.kind(), kind);
            assert_eq!(Kind::ALL[kind.index()], kind);
        }
    }

    #[test]
    fn validate_names_the_level() {
        let too_many = (0..=MAX_NAMES_PER_LEVEL).map(|i| i.to_string()).collect();
        let cases = [
            (
                Level::Vm,
                Lock::Shared(BTreeSet::new()),
                LockErrorKind::EmptySet,
            ),
            (
                Level::Network,
                Lock::Exclusive(too_many),
                LockErrorKind::TooManyNames,
            ),
            (
                Level::Host,
                Lock::Exclusive(named(&["h1", ""])),
                LockErrorKind::EmptyName,
            ),
        ];
        for (level, lock, kind) in cases {
            let error = Locks::default().with(level, lock).validate().unwrap_err();
            assert_eq!((error.level, error.kind), (level, kind));
            assert!(error.to_string().contains(level.name()), "{error}");
        }
        let at_limit = (0..MAX_NAMES_PER_LEVEL).map(|i| i.to_string()).collect();
        assert_eq!(
            Locks::default()
                .with(Level::Vm, Lock::Exclusive(at_limit))
                .validate(),
            Ok(())
        );
    }
}
