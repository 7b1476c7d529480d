//! Starting and stopping the server: open and migrate the store, make sure
//! an admin can get in, register the built-in units and policy, load every
//! stored unit, bind, serve until SIGINT or SIGTERM, let requests in flight
//! finish, and close the store cleanly. The connection layer (timeouts,
//! connection caps) is in `listen`.

pub(crate) mod builtins;
mod follow;
mod listen;
mod loading;
mod starting;
pub mod tls;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{Signal, SignalKind, signal};
use uuid::Uuid;

use crate::api::{self, ApiLimits, AppState};
use crate::auth::{self, ADMIN_TOKEN_ENV, Bootstrap};
use crate::config::ServeArgs;
use crate::fleet::{Fleet, FleetConfig};
use crate::pools::Pools;
use crate::registry::Registry;
use crate::sandbox::Runtime;
use crate::store::{Backend, Location, Store, StoreError};
use crate::upload::Modules;

pub use builtins::{BUILTIN_POLICY_NAME, builtin_unit_id};
pub use listen::{CONNECTION_RETRY_AFTER_SECS, ConnectionLimits};

/// Whether the listeners speak TLS.
fn tls_configured(args: &ServeArgs) -> bool {
    args.tls_cert.is_some()
}

/// This replica's place in the fleet: a new id, and the URL the others
/// forward to (`--advertise-url`, or the address bound).
fn fleet_config(
    args: &ServeArgs,
    bound: Option<SocketAddr>,
    tls: bool,
) -> Result<FleetConfig, StartError> {
    let url = match (&args.advertise_url, bound) {
        (Some(url), _) => url.trim_end_matches('/').to_owned(),
        (None, Some(addr)) if !addr.ip().is_unspecified() => format!("http://{addr}"),
        (None, _) => {
            return Err(StartError::Fleet(
                "with a PostgreSQL database, say where the other replicas reach this one: \
                 --advertise-url http://HOST:PORT (listening on every address names none)"
                    .to_owned(),
            ));
        }
    };
    // Their callers send no token, so a replica could not forward their
    // requests to another's main listener (docs/fleet.md, limits).
    if args.extender_listen.is_some() || args.ovirt_listen.is_some() {
        return Err(StartError::Fleet(
            "--extender-listen and --ovirt-listen are not supported with a PostgreSQL database \
             yet: their calls carry no token to forward to the replica that owns a cluster; use \
             the main listener's /k8s routes with an engine token, or one server on SQLite"
                .to_owned(),
        ));
    }
    if tls || !url.starts_with("http://") {
        return Err(StartError::Fleet(format!(
            "replicas forward requests to each other over plain HTTP on a private network; \
             `{url}` with TLS listeners is not supported yet (docs/fleet.md)"
        )));
    }
    Ok(FleetConfig {
        replica_id: Uuid::new_v4().to_string(),
        url,
        lease: Duration::from_millis(args.owner_lease_ms),
    })
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("could not create the database directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not open the store at {location}: {source}")]
    Store {
        location: crate::store::Location,
        source: StoreError,
    },
    #[error(transparent)]
    Bootstrap(#[from] auth::BootstrapError),
    #[error("{0}")]
    Fleet(String),
    #[error("invalid unit limits: {0}")]
    Limits(#[from] crate::sandbox::LimitsError),
    #[error("could not start the WebAssembly runtime: {0}")]
    Runtime(String),
    #[error("could not locate the sandpiper binary for compiling uploads: {0}")]
    Exe(std::io::Error),
    #[error("built-in unit `{name}` could not be registered: {message}")]
    Builtin { name: String, message: String },
    #[error(transparent)]
    StoreOp(#[from] StoreError),
    #[error("could not listen for SIGINT and SIGTERM: {0}")]
    Signals(std::io::Error),
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// What the application serves over: the API's state, and the prestarted
/// pools built on it (above the API, so not in its state).
#[derive(Clone)]
pub struct Services {
    pub state: AppState,
    pub pools: Pools,
}

impl Services {
    /// The whole application: the API's routes, the pools' and the
    /// console's, every one with its access check, body limits and error
    /// shape.
    pub fn app(&self) -> axum::Router {
        let pools = crate::pools::routes::routes().layer(axum::Extension(self.pools.clone()));
        api::app(self.state.clone(), pools, crate::console::routes())
    }
}

/// Every route [`Services::app`] serves, as (method, path): the OpenAPI
/// document's and the console's.
pub fn served_routes(limits: &ApiLimits) -> Vec<(axum::http::Method, String)> {
    let mut routes = api::served_routes(limits, crate::pools::routes::routes());
    routes.extend(
        crate::console::PATHS
            .iter()
            .map(|path| (axum::http::Method::GET, (*path).to_owned())),
    );
    routes
}

/// A server that has loaded everything and bound its socket.
pub struct Server {
    /// The main listener, served since the bind; it stops when `stopping`
    /// says so or is dropped.
    main: tokio::task::JoinHandle<()>,
    stopping: tokio::sync::watch::Sender<bool>,
    /// The extender-only listener (`--extender-listen`), if asked for.
    extender: Option<TcpListener>,
    /// oVirt's XML-RPC listener (`--ovirt-listen`), if asked for.
    ovirt: Option<TcpListener>,
    /// TLS for every listener (`--tls-cert`, `--tls-key`), if asked for.
    tls: Option<tls::Tls>,
    addr: SocketAddr,
    services: Services,
    grace: Duration,
    connections: ConnectionLimits,
    signals: StopSignals,
}

impl Server {
    /// Binds the main socket first and answers 503 `starting` on it while
    /// the units load; returns once the real routes answer there and the
    /// engines' own listeners are bound. [`Server::run`] serves them all
    /// until a signal.
    pub async fn start(args: ServeArgs) -> Result<Server, StartError> {
        let signals = StopSignals::install().map_err(StartError::Signals)?;
        let supplied = std::env::var(ADMIN_TOKEN_ENV)
            .ok()
            .filter(|t| !t.is_empty());
        let exe = std::env::current_exe().map_err(StartError::Exe)?;
        // Before anything is opened: a bad certificate stops the start.
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(tls::Tls::load(cert, key)?),
            _ => None,
        };
        let listener = TcpListener::bind(args.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: args.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: args.listen,
            source,
        })?;
        let connections = ConnectionLimits::from_args(&args);
        // Bound before the units load: until they are, every request is
        // answered 503 `starting` (see `starting`), not refused.
        tracing::info!(%addr, "bound; answering 503 `starting` until the units are loaded");
        let routes = starting::Routes::default();
        // Dropping the sender (a failed start, a dropped server) stops the
        // listener as sending `true` does.
        let (stopping, stopping_rx) = tokio::sync::watch::channel(false);
        let main = tokio::spawn(listen::serve(
            listener,
            routes.app(),
            connections,
            tls.clone(),
            stopped(stopping_rx),
        ));
        let services = Server::build_state(&args, supplied.as_deref(), exe, Some(addr)).await?;
        let extender = match args.extender_listen {
            None => None,
            Some(extender_addr) => {
                let bound =
                    TcpListener::bind(extender_addr)
                        .await
                        .map_err(|source| StartError::Bind {
                            addr: extender_addr,
                            source,
                        })?;
                tracing::info!(addr = %extender_addr, "listening for kube-scheduler's extender calls, without tokens");
                Some(bound)
            }
        };
        let ovirt = match args.ovirt_listen {
            None => None,
            Some(ovirt_addr) => {
                let bound =
                    TcpListener::bind(ovirt_addr)
                        .await
                        .map_err(|source| StartError::Bind {
                            addr: ovirt_addr,
                            source,
                        })?;
                tracing::info!(addr = %ovirt_addr, "listening for oVirt's external scheduler calls (XML-RPC), without tokens");
                Some(bound)
            }
        };
        routes.ready(services.app());
        tracing::info!(%addr, tls = tls.is_some(), "listening");
        Ok(Server {
            main,
            stopping,
            extender,
            ovirt,
            tls,
            addr,
            services,
            grace: args.shutdown_grace(),
            connections,
            signals,
        })
    }

    /// Everything a request needs, built as `sandpiper serve` builds it
    /// but with no socket and no signals: creates the database's
    /// directory, opens and migrates the store, makes sure an admin can
    /// get in, registers the built-in units and policy, loads every stored
    /// unit and starts placement, the operations queue and the periodic
    /// balance.
    ///
    /// What a start otherwise takes from its process is passed in, so that
    /// tests build this very state in process (`tests/api`): `admin_token`
    /// is the token `SANDPIPER_ADMIN_TOKEN` supplies (none: one is
    /// generated on a first start), and `exe` is the `sandpiper` binary
    /// uploads are compiled by.
    pub async fn build_state(
        args: &ServeArgs,
        admin_token: Option<&str>,
        exe: PathBuf,
        bound: Option<SocketAddr>,
    ) -> Result<Services, StartError> {
        // SQLite keeps the generated admin token beside its file; with
        // PostgreSQL it goes where the default database would be (that
        // directory is made only if a token is written there).
        let token_path = auth::admin_token_path(match &args.db {
            Location::Sqlite(path) => path,
            Location::Postgres(_) => Path::new(crate::config::DEFAULT_DB),
        });
        let data_dir = match &args.db {
            Location::Sqlite(path) => path.parent(),
            Location::Postgres(_) => None,
        };
        if let Some(dir) = data_dir.filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt as _;
            // 0700: the directory holds the database and the admin token.
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true).mode(0o700);
            builder.create(dir).map_err(|source| StartError::DataDir {
                path: dir.to_owned(),
                source,
            })?;
        }
        let store = Store::connect(&args.db, args.store_limits())
            .await
            .map_err(|source| StartError::Store {
                location: args.db.clone(),
                source,
            })?;
        store.set_decision_log_budget(args.decision_log_bytes());
        tracing::info!(db = %args.db, "store open, migrations applied");

        match auth::bootstrap_admin(&store, &token_path, admin_token).await? {
            Bootstrap::Generated(path) => tracing::warn!(
                path = %std::path::absolute(&path).unwrap_or(path).display(),
                "first start: generated an admin token and wrote it to this file (mode 0600); \
                 read it, keep it safe and delete the file"
            ),
            Bootstrap::Supplied => tracing::info!("admin token from {ADMIN_TOKEN_ENV} registered"),
            Bootstrap::Existing => {}
        }

        let limits = args.unit_limits();
        limits.validate()?;
        let runtime =
            Arc::new(Runtime::new(limits).map_err(|e| StartError::Runtime(e.to_string()))?);
        let modules = Modules::new(runtime, args.compile_limits(), exe);
        let registry = Registry::new();

        builtins::register(&store, &modules, &registry, args.unit_cache_dir()).await?;
        loading::load_uploaded(&store, &modules, &registry).await?;
        tracing::info!(units = registry.len(), "units loaded");

        let placement = crate::placement::PlacementService::start(
            store.clone(),
            args.placement.config(args.decisions_retained),
        );
        let fleet = match store.backend() {
            Backend::Sqlite => Fleet::single(store.clone()),
            Backend::Postgres => {
                let config = fleet_config(args, bound, tls_configured(args))?;
                tracing::info!(replica = %config.replica_id, url = %config.url, "one replica of a fleet");
                Fleet::shared(store.clone(), config)
            }
        };
        let operations = crate::operations::OperationsService::start(
            store.clone(),
            placement.clone(),
            args.operations.config(),
            !fleet.is_shared(),
        )
        .await?;
        fleet.start(placement.clone(), operations.clone());
        let operations_held = operations.unfinished_count().await;
        tracing::info!(operations = operations_held, "operations queue loaded");
        let pools = crate::pools::Pools::new(args.pools.config());
        let state = AppState::new(
            store,
            registry,
            modules,
            args.api_limits(),
            crate::api::Held {
                placement,
                operations,
                fleet,
            },
            args.retention(),
        );
        crate::pools::start_monitor(state.clone(), pools.clone());
        tokio::spawn(crate::rebalance::run(state.clone()));
        if state.fleet().is_shared() {
            tokio::spawn(follow::run(state.clone()));
        }
        Ok(Services { state, pools })
    }

    /// The address actually bound (the OS picks the port for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until SIGINT or SIGTERM, then stops accepting, waits up to
    /// the grace period for requests in flight, and closes the store.
    pub async fn run(self) -> std::io::Result<()> {
        let Server {
            main,
            stopping,
            extender,
            ovirt,
            tls,
            services,
            grace,
            connections,
            signals,
            ..
        } = self;
        let state = services.state.clone();
        let store = state.store().clone();
        let operations = state.operations().clone();
        // The engines' own listeners stop when the main one does.
        let beside = |listener: TcpListener, app: axum::Router| {
            tokio::spawn(listen::serve(
                listener,
                app,
                connections,
                tls.clone(),
                stopped(stopping.subscribe()),
            ))
        };
        let extender = extender.map(|l| beside(l, api::extender_app(state.clone())));
        let ovirt = ovirt.map(|l| beside(l, api::ovirt::app(state.clone())));
        let stopping_rx = stopping.subscribe();
        let serve = async move {
            signals.received().await;
            tracing::info!("shutting down: no new connections, finishing requests in flight");
            // Long polls and event streams would otherwise hold the
            // shutdown for its whole grace period.
            operations.shut_down();
            let _ = stopping.send(true);
            let _ = main.await;
            for listener in [extender, ovirt].into_iter().flatten() {
                let _ = listener.await;
            }
        };
        let grace_expired = async move {
            let mut stopping = stopping_rx;
            // Wait for the signal, then for the grace period.
            while !*stopping.borrow() {
                if stopping.changed().await.is_err() {
                    // The sender is gone only when serving ended.
                    std::future::pending::<()>().await;
                }
            }
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            () = serve => {},
            () = grace_expired => {
                tracing::warn!(grace_secs = grace.as_secs(), "requests still running after the grace period; stopping anyway");
            }
        };
        // Requests have finished: the other replicas may take this one's
        // clusters over now rather than when the leases end.
        state.fleet().leave().await;
        store.close().await;
        tracing::info!("store closed; bye");
        Ok(())
    }
}

/// Resolves once `stopping` says `true` or its sender is dropped: the stop
/// of a listener.
async fn stopped(mut stopping: tokio::sync::watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// SIGINT (Ctrl-C) and SIGTERM, listened for from the moment the server
/// is started, so a signal that arrives before serving begins still stops
/// it cleanly instead of killing the process.
struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignals {
    fn install() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves on the first of the two signals.
    async fn received(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {},
            _ = self.terminate.recv() => {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::access;

    fn limits() -> ApiLimits {
        ApiLimits {
            max_module_bytes: 1,
            max_snapshot_bytes: 1,
        }
    }

    #[test]
    fn the_router_and_the_access_table_list_the_same_routes() {
        let mut served: Vec<String> = served_routes(&limits())
            .into_iter()
            .map(|(m, p)| format!("{m} {p}"))
            .collect();
        served.sort();
        let mut declared: Vec<String> = access::ROUTES
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        declared.sort();
        assert_eq!(served, declared);
    }
}
