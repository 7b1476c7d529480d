#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: a fresh cluster in a new
# temporary directory, listening only on 127.0.0.1 on a random free port,
# run by an unprivileged user, tuned for speed over durability.
#
# Usage (scripts/test.sh does exactly this):
#
#   env=$(scripts/postgres-test-server.sh start)   # fails if it cannot start
#   eval "$env"                                    # sets and exports:
#     SANDPIPER_TEST_POSTGRES       postgres://sandpiper@127.0.0.1:PORT/postgres
#     SANDPIPER_TEST_POSTGRES_DIR   the temporary directory (data, socket, log)
#     SANDPIPER_TEST_POSTGRES_CA    the certificate the server's TLS uses
#   ...
#   scripts/postgres-test-server.sh stop "$SANDPIPER_TEST_POSTGRES_DIR"
#
#   scripts/postgres-test-server.sh bindir   # prints the PostgreSQL bin
#                                            # directory used; exit 1 if none
#
# `start` writes only those shell assignments to stdout (ssh-agent
# style, so one command substitution gets both); everything else goes to
# stderr. The URL's user `sandpiper` is a superuser, with trust
# authentication from 127.0.0.1 and the socket, so the tests can CREATE
# DATABASE freely. Several servers can run at once, each on its own port.
# `stop` shuts the server down at once (`pg_ctl -m immediate`, the data is
# not kept) and deletes the directory; it prints nothing when all goes well
# and does nothing for a directory that is already gone.
#
# The server binaries (initdb, pg_ctl, postgres) are taken from
# $SANDPIPER_PG_BINDIR if set, else from PATH, else from the highest
# version under /usr/lib/postgresql/*/bin (Debian's `postgresql` package).
# Run as root, the server runs as the system user `sandpiper-pg` (created
# here if missing; initdb and postgres refuse to run as root), else as the
# calling user.
set -euo pipefail

PG_USER=sandpiper-pg        # the unprivileged user when started by root
MARKER=sandpiper-postgres-test-server   # file that marks our directories
dir=                        # the server's directory, for start's cleanup

say() { printf 'postgres-test-server: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# The directory holding initdb, pg_ctl and postgres, or nothing.
find_bindir() {
  local dir candidate
  if [ -n "${SANDPIPER_PG_BINDIR:-}" ]; then
    dir=$SANDPIPER_PG_BINDIR
    [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ] \
      || die "SANDPIPER_PG_BINDIR=$dir has no initdb, pg_ctl and postgres"
    printf '%s\n' "$dir"
    return
  fi
  if dir=$(command -v pg_ctl 2>/dev/null); then
    dir=$(dirname "$dir")
    if [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
      printf '%s\n' "$dir"
      return
    fi
  fi
  # Debian keeps the server binaries off PATH, one directory per major
  # version; take the highest.
  for candidate in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r); do
    if [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ] \
      && [ -x "$candidate/postgres" ]; then
      printf '%s\n' "$candidate"
      return
    fi
  done
}

# Runs a command as $run_user (set by setup_user) or, when empty, as is.
# setpriv is in util-linux, which every Debian system has; unlike su or
# runuser it needs no PAM session and no login shell.
run_user=
run_as() {
  if [ -n "$run_user" ]; then
    setpriv --reuid="$(id -u "$run_user")" --regid="$(id -g "$run_user")" \
      --clear-groups -- "$@"
  else
    "$@"
  fi
}

setup_user() {
  run_user=
  [ "$(id -u)" -eq 0 ] || return 0
  if ! getent passwd "$PG_USER" >/dev/null; then
    # Two test runs may race to create it: the loser's useradd fails, but
    # the user is there.
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin --comment 'Sandpiper test PostgreSQL' \
      "$PG_USER" 2>/dev/null || getent passwd "$PG_USER" >/dev/null \
      || die "running as root, but cannot create the user $PG_USER to run PostgreSQL as (useradd failed)"
  fi
  run_user=$PG_USER
}

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
  else
    # A collision is caught below: the server fails to bind and we retry.
    printf '%s\n' $((20000 + RANDOM % 12000))
  fi
}

start() {
  local bindir port attempt
  bindir=$(find_bindir)
  [ -n "$bindir" ] || die "no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or under /usr/lib/postgresql/*/bin; install them with \`apt-get install postgresql\`"
  setup_user

  dir=$(mktemp -d "${TMPDIR:-/tmp}/sandpiper-pg.XXXXXXXX")
  # Until the server is up and handed over, a failure (or Ctrl-C) removes
  # it all.
  trap 'stop "$dir" >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  printf 'bindir=%s\n' "$bindir" >"$dir/$MARKER"
  if [ -n "$run_user" ]; then
    chown "$run_user:" "$dir"
    run_as test -w "$dir" \
      || die "$run_user cannot write to $dir (is a parent directory closed to other users? try TMPDIR=/tmp)"
  fi
  # The server's and initdb's working directory: they are not root's home.
  cd "$dir"

  # The cluster's locale is C: text sorts by byte, as in SQLite, whatever
  # the machine's locale (which may not even be generated in a container).
  if ! run_as "$bindir/initdb" --pgdata="$dir/data" --username=sandpiper \
    --encoding=UTF8 --locale=C --auth-local=trust --auth-host=trust \
    --no-sync >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    die "initdb failed"
  fi

  # TLS, for the test of the store's encrypted, verified connections: a
  # CA made now, which the tests trust (SANDPIPER_TEST_POSTGRES_CA), and
  # the server's certificate for 127.0.0.1 signed by it (webpki refuses a
  # self-signed certificate as a server's own). openssl comes with
  # Debian's postgresql, through ssl-cert.
  command -v openssl >/dev/null \
    || die "openssl is missing (apt-get install openssl): the tests connect over TLS"
  printf '%s\n' 'subjectAltName=IP:127.0.0.1' 'basicConstraints=CA:FALSE' \
    'keyUsage=digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' \
    >"$dir/server.ext"
  if ! { run_as openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
           -subj /CN=sandpiper-test-ca -keyout "$dir/ca.key" -out "$dir/ca.crt" \
      && run_as openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 \
           -keyout "$dir/data/server.key" -out "$dir/server.csr" \
      && run_as openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" \
           -CAkey "$dir/ca.key" -CAcreateserial -days 2 -extfile "$dir/server.ext" \
           -out "$dir/data/server.crt"; } >"$dir/openssl.log" 2>&1; then
    cat "$dir/openssl.log" >&2
    die "openssl could not make the server's certificate"
  fi
  run_as chmod 600 "$dir/data/server.key"
  chmod 644 "$dir/ca.crt"

  cat >>"$dir/data/postgresql.conf" <<EOF

# scripts/postgres-test-server.sh: a throwaway server for the tests.
ssl = on
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
# Tests run in parallel, each with its own database, up to three replicas
# per test each holding about ten connections.
max_connections = 600
shared_buffers = 64MB
# The data is thrown away: no durability.
fsync = off
synchronous_commit = off
full_page_writes = off
# Predictable on a small, busy machine: no parallel workers, no JIT.
max_parallel_workers_per_gather = 0
jit = off
timezone = 'UTC'
EOF

  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    rm -f "$dir/server.log"   # pg_ctl creates it, as the server's user
    if run_as "$bindir/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" \
      --options="-p $port" --wait --timeout=60 start >"$dir/pg_ctl.log" 2>&1; then
      break
    fi
    # Another process took the port between our check and the server's
    # bind: try another one. Any other failure is final.
    if [ "$attempt" -lt 5 ] && grep -q 'Address already in use' "$dir/server.log"; then
      continue
    fi
    cat "$dir/pg_ctl.log" "$dir/server.log" >&2 2>/dev/null || true
    die "PostgreSQL did not start (log above)"
  done

  trap - EXIT
  local url="postgres://sandpiper@127.0.0.1:$port/postgres"
  say "$("$bindir/postgres" --version) on $url, in $dir${run_user:+, as $run_user}"
  printf 'SANDPIPER_TEST_POSTGRES=%q; export SANDPIPER_TEST_POSTGRES;\n' "$url"
  printf 'SANDPIPER_TEST_POSTGRES_DIR=%q; export SANDPIPER_TEST_POSTGRES_DIR;\n' "$dir"
  printf 'SANDPIPER_TEST_POSTGRES_CA=%q; export SANDPIPER_TEST_POSTGRES_CA;\n' "$dir/ca.crt"
}

stop() {
  local dir=${1:-${SANDPIPER_TEST_POSTGRES_DIR:-}} bindir owner pid
  [ -n "$dir" ] || die "stop: give the server's directory (SANDPIPER_TEST_POSTGRES_DIR)"
  [ -d "$dir" ] || return 0
  [ -f "$dir/$MARKER" ] || die "stop: $dir was not made by this script; leaving it alone"
  bindir=$(sed -n 's/^bindir=//p' "$dir/$MARKER")
  cd /
  if [ -f "$dir/data/postmaster.pid" ]; then
    run_user=
    owner=$(stat -c %U "$dir/data")
    if [ "$(id -u)" -eq 0 ] && [ "$owner" != root ]; then run_user=$owner; fi
    if ! run_as "$bindir/pg_ctl" --pgdata="$dir/data" --mode=immediate \
      --wait --timeout=30 stop >/dev/null 2>&1; then
      # Still there? End it by its own pid, no other process.
      pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        say "stop: pg_ctl failed; sending SIGQUIT to the server (pid $pid)"
        kill -QUIT "$pid" 2>/dev/null || true
        sleep 1
      fi
    fi
  fi
  rm -rf -- "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  bindir)
    bindir=$(find_bindir)
    [ -n "$bindir" ] || exit 1
    printf '%s\n' "$bindir"
    ;;
  *)
    say "usage: $0 start | stop [DIR] | bindir (see the comment at the top)"
    exit 2
    ;;
esac
