#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs the pinned toolchains
# that build the Python, JavaScript and C example units and the pinned test
# tools (idempotent: a quick check when they are there), starts a throwaway
# PostgreSQL server, then runs every test in the workspace, and the API
# suite once more with its store on PostgreSQL (SANDPIPER_TEST_STORE).
# Extra arguments go to `cargo test`.
#
# PostgreSQL: the tests of the PostgreSQL store read the server's URL from
# SANDPIPER_TEST_POSTGRES and create a database of their own per test
# (CREATE DATABASE), so the URL's user must be allowed to create databases.
# Unless that variable is already set, this script starts a server with
# scripts/postgres-test-server.sh (a superuser `sandpiper` on 127.0.0.1, a
# random port, a temporary directory), exports its URL and stops it and
# removes its directory when the tests end, fail or are interrupted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Fail before the long installs, not after.
if [ -z "${SANDPIPER_TEST_POSTGRES:-}" ] \
  && ! scripts/postgres-test-server.sh bindir >/dev/null; then
  cat >&2 <<'EOF'
scripts/test.sh: the tests need PostgreSQL, and no server binaries (initdb,
pg_ctl, postgres) are on PATH or under /usr/lib/postgresql/*/bin. Either
  - install them: `apt-get install postgresql` on Debian (or run .ci/run,
    which does that and then runs this script), or
  - point the tests at a server of yours:
      SANDPIPER_TEST_POSTGRES=postgres://USER@HOST:PORT/postgres scripts/test.sh
    where USER may CREATE DATABASE (the tests make one per test).
EOF
  exit 1
fi

scripts/install-guest-toolchains.sh
scripts/install-test-tools.sh

if [ -z "${SANDPIPER_TEST_POSTGRES:-}" ]; then
  # Sets and exports SANDPIPER_TEST_POSTGRES (the URL) and
  # SANDPIPER_TEST_POSTGRES_DIR (its directory); see the script's header.
  pg_env=$(scripts/postgres-test-server.sh start)
  eval "$pg_env"
  trap 'scripts/postgres-test-server.sh stop "$SANDPIPER_TEST_POSTGRES_DIR"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
fi

# Not `exec`: the EXIT trap has to stop the server after the tests.
# Then the API suite (tests/api) a second time on PostgreSQL: the same
# tests over the other implementation of the store (by default it runs on
# SQLite; the store's own tests run on both in the first run already).
# Both runs happen even if the first fails; the script fails if either
# does. The extra arguments go to both (a filter, `--release`, ...).
# The second run selects `--workspace` too, not `-p sandpiper`: cargo
# resolves features for the packages selected, and for `sandpiper` alone
# wasmtime's `bindgen!` macro gets a different feature set, which rebuilt
# that macro's dependencies, wasmtime and the whole host a second time
# (minutes on CI's two cores) just to run the same tests again.
status=0
cargo test --workspace "$@" || status=$?
SANDPIPER_TEST_STORE=postgres cargo test --workspace --test api "$@" || status=$?
exit "$status"
