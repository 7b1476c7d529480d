#!/usr/bin/env bash
# Installs the pinned toolchains that build policy units written in Python,
# JavaScript and C (Rust needs only rust-toolchain.toml's wasm32-wasip2
# target). Idempotent: a second run checks versions and does nothing.
#
#   Python: componentize-py, from PyPI, in a virtualenv;
#   JS:     @bytecodealliance/componentize-js, from npm, with `npm ci` from
#           guest-sdk/js/package-lock.json;
#   C:      clang, lld, wasi-libc and compiler-rt's wasm32 builtins from
#           Debian (bookworm), plus the workspace's sandpiper-c-component.
#
# Everything but the Debian packages lands in $SANDPIPER_GUEST_TOOLCHAINS
# (default target/guest-toolchains), which scripts/build-unit.sh reads.
# Needs python3 with venv, node >= 18 with npm, and apt (as root or sudo)
# when the Debian packages are missing.
#
#   scripts/install-guest-toolchains.sh                 # every language
#   scripts/install-guest-toolchains.sh --lang python   # one author's
#   scripts/install-guest-toolchains.sh --lang rust,c   # a list
#
# An author installs only their language: a Python author needs neither
# clang, nor cargo tools, nor npm. The test suite installs all of them.
set -euo pipefail

usage() {
  echo "usage: $0 [--lang rust,python,js,c]" >&2
  exit 2
}
langs=rust,python,js,c
while [ $# -gt 0 ]; do
  case "$1" in
    --lang) [ $# -ge 2 ] || usage; langs=$2; shift 2 ;;
    --lang=*) langs=${1#--lang=}; shift ;;
    -h | --help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
done
wants() { [[ ",$langs," == *",$1,"* ]]; }
IFS=, read -ra asked <<<"$langs"
for lang in "${asked[@]}"; do
  case "$lang" in
    rust | python | js | c) ;;
    *) echo "unknown language: $lang (one of rust, python, js, c)" >&2; exit 2 ;;
  esac
done

# Pinned versions (PyPI and Debian; npm's pin is the committed lock file).
COMPONENTIZE_PY_VERSION=0.25.1
DEBIAN_PACKAGES=(clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32)

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=${SANDPIPER_GUEST_TOOLCHAINS:-$repo/target/guest-toolchains}
mkdir -p "$tools"

say() { printf 'install-guest-toolchains: %s\n' "$*"; }

# --- C: Debian packages ------------------------------------------------------
install_c_packages() {
missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  say "apt-get install ${missing[*]}"
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
}

# --- Rust: the wasm32-wasip2 target ------------------------------------------
# rustup adds rust-toolchain.toml's targets only when it installs the
# toolchain itself; a machine that already had the pinned compiler lacks
# the target, and every guest build then fails with "can't find crate for
# `std`".
install_rust_target() {
if command -v rustup >/dev/null 2>&1 &&
  ! (cd "$repo" && rustup target list --installed) | grep -qx wasm32-wasip2; then
  say "rustup target add wasm32-wasip2"
  (cd "$repo" && rustup target add wasm32-wasip2)
fi
}

# --- C: the bindings generator and component encoder -------------------------
install_c_component() {
say "cargo build -p sandpiper-c-component"
(cd "$repo" && "${CARGO:-cargo}" build --quiet -p sandpiper-c-component)
}

# --- Python: componentize-py in a virtualenv ---------------------------------
install_python() {
componentize_py=$tools/python/bin/componentize-py
if ! "$componentize_py" --version 2>/dev/null | grep -qx "componentize-py $COMPONENTIZE_PY_VERSION"; then
  say "pip install componentize-py==$COMPONENTIZE_PY_VERSION"
  python3 -m venv "$tools/python"
  "$tools/python/bin/pip" install --quiet --disable-pip-version-check \
    "componentize-py==$COMPONENTIZE_PY_VERSION"
fi
}

# --- JavaScript: componentize-js from the committed lock file ----------------
install_js() {
js=$tools/js
if ! cmp -s "$repo/guest-sdk/js/package-lock.json" "$js/package-lock.json" ||
  [ ! -x "$js/node_modules/.bin/componentize-js" ]; then
  say "npm ci @bytecodealliance/componentize-js (guest-sdk/js/package-lock.json)"
  mkdir -p "$js"
  cp "$repo/guest-sdk/js/package.json" "$repo/guest-sdk/js/package-lock.json" "$js/"
  # --ignore-scripts: nothing in the lock needs an install script, and the
  # weval package (used only by --aot, which we never pass) would otherwise
  # be free to fetch binaries.
  (cd "$js" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
}

ready=()
if wants rust; then
  install_rust_target
  ready+=("rust wasm32-wasip2")
fi
if wants c; then
  install_c_packages
  install_c_component
  ready+=("$(clang-14 --version | head -n 1)")
fi
if wants python; then
  install_python
  ready+=("$("$componentize_py" --version)")
fi
if wants js; then
  install_js
  ready+=("componentize-js $(
    cd "$js" && node -p 'require("./node_modules/@bytecodealliance/componentize-js/package.json").version'
  )")
fi
say "ready: $(IFS=,; echo "${ready[*]}" | sed 's/,/, /g')"
