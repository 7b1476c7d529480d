//! Roles of bearer tokens: what a token may do. Below both the store, which
//! keeps each token's role, and `auth`, which checks it, so that neither
//! imports the other for it.

/// What a token may do.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// GET only.
    Reader,
    /// Reads, plus schedule and balance decisions.
    Engine,
    /// Everything: units, policies, clusters, tokens.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Reader, Role::Engine, Role::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Engine => "engine",
            Role::Admin => "admin",
        }
    }

    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether this role includes everything `required` may do.
    pub fn allows(self, required: Role) -> bool {
        self >= required
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
