//! Which server and token a command uses: `--server`/`--token` (clap also
//! reads `SANDPIPER_URL`/`SANDPIPER_TOKEN` into them), else the file
//! `sandpiper login` wrote, else the default address and no token.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Remote;
use super::client::{CliError, Client};

/// Where a server runs when nothing says otherwise (`sandpiper serve`'s
/// default listen address).
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// The variable that names another config file.
pub const CONFIG_ENV: &str = "SANDPIPER_CONFIG";

/// What `sandpiper login` keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    pub server: String,
    pub token: Option<String>,
    /// The CA an `https://` server is verified against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
}

/// The config file: `$SANDPIPER_CONFIG`, else
/// `$XDG_CONFIG_HOME/sandpiper/config.json`, else
/// `~/.config/sandpiper/config.json`.
pub fn path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(CONFIG_ENV) {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))?;
    Some(base.join("sandpiper").join("config.json"))
}

fn load() -> Result<Option<Saved>, CliError> {
    let Some(path) = path() else { return Ok(None) };
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            CliError::Usage(format!(
                "{}: not a sandpiper config file: {e}",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::Usage(format!("{}: {e}", path.display()))),
    }
}

/// Writes the config file, readable by its owner only (it holds a token).
pub fn save(saved: &Saved) -> Result<PathBuf, CliError> {
    let path = path()
        .ok_or_else(|| CliError::Usage(format!("no config file: set {CONFIG_ENV} or HOME")))?;
    let io = |e: std::io::Error| CliError::Usage(format!("{}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text = serde_json::to_string_pretty(saved).map_err(|e| CliError::Usage(e.to_string()))?;
    crate::auth::write_secret(&path, &text).map_err(io)?;
    Ok(path)
}

/// The client a command uses.
pub fn client(remote: &Remote) -> Result<Client, CliError> {
    let saved = if remote.server.is_some() && remote.token.is_some() {
        None
    } else {
        load()?
    };
    let server = remote
        .server
        .clone()
        .or_else(|| saved.as_ref().map(|s| s.server.clone()))
        .unwrap_or_else(|| DEFAULT_SERVER.to_owned())
        .trim_end_matches('/')
        .to_owned();
    // A saved token and CA go only to the server they were saved for.
    let saved = saved.filter(|s| s.server == server);
    let ca_cert = remote
        .ca_cert
        .clone()
        .or_else(|| saved.as_ref().and_then(|s| s.ca_cert.clone()));
    let token = remote.token.clone().or_else(|| saved.and_then(|s| s.token));
    Client::new(&server, token, ca_cert.as_deref())
}
