#!/usr/bin/env bash
# Builds a policy unit written in Python, JavaScript or C into a component.
#
#   scripts/build-unit.sh python <world> <out.wasm> <app.py>
#   scripts/build-unit.sh js     <world> <out.wasm> <unit.js>
#   scripts/build-unit.sh c      <world> <out.wasm> <unit.c>...
#
# <world> is one of wit/0.2.0/policy.wit's worlds (filter-unit, score-unit,
# filter-score-unit, ...): the roles the unit exports. The toolchains come
# from scripts/install-guest-toolchains.sh, which must have run once; this
# script never downloads anything. Rust units are ordinary crates built for
# wasm32-wasip2 (see docs/authoring.md).
#
# Each language is built so that the component imports only what the host
# allows (sandpiper:policy/* and a few harmless WASI interfaces):
#   python: componentize-py --stub-wasi (no WASI imports at all);
#   js:     componentize-js without its HTTP features (wasi:http is refused
#           by the host); stdio, clocks and random stay, so an uncaught
#           exception's message and stack reach the error the host reports
#           (the sandbox freezes clocks and fixes randomness). Never --aot:
#           its weval step downloads a binary;
#   c:      clang against Debian's wasi-libc (preview 1), then wasmtime 48's
#           reactor adapter through sandpiper-c-component.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=${SANDPIPER_GUEST_TOOLCHAINS:-$repo/target/guest-toolchains}
# The helper layers (guest-sdk/{python,js,c}) are written against
# sandpiper:policy@0.2.0, which the host still serves; only the Rust SDK
# has moved to 0.3.0 (docs/wit-versions.md).
wit=$repo/wit/0.2.0

usage() {
  sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

missing() {
  echo "build-unit.sh: $1 is not installed; run scripts/install-guest-toolchains.sh" >&2
  exit 3
}

[ $# -ge 4 ] || usage
language=$1
world=$2
out=$3
shift 3

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

case $language in
python)
  [ $# -eq 1 ] || usage
  componentize_py=$tools/python/bin/componentize-py
  [ -x "$componentize_py" ] || missing "componentize-py"
  module=$(basename "$1" .py)
  # componentize-py runs the app once at build time and its interpreter
  # writes __pycache__ next to every module it imports: build from copies of
  # the app's directory and of the helper layer, so the sources stay clean.
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -R "$(dirname "$1")" "$work/app"
  cp -R "$repo/guest-sdk/python" "$work/helper"
  "$componentize_py" -d "$wit" -w "$world" componentize "$module" \
    -p "$work/app" -p "$work/helper" --stub-wasi -o "$out" >/dev/null
  ;;
js)
  [ $# -eq 1 ] || usage
  componentize_js=$tools/js/node_modules/.bin/componentize-js
  [ -x "$componentize_js" ] || missing "componentize-js"
  source=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  # componentize-js lets the module import files under its working
  # directory: the repository for units inside it (they import the helper
  # from guest-sdk/js), else the unit's own directory (copy sandpiper.js
  # next to the unit).
  case $source in
  "$repo"/*) root=$repo ;;
  *) root=$(dirname "$source") ;;
  esac
  (cd "$root" && "$componentize_js" "$source" -w "$wit" -n "$world" \
    -d http fetch-event -o "$out") >/dev/null
  ;;
c)
  [ $# -ge 1 ] || usage
  clang=${CLANG:-clang-14}
  command -v "$clang" >/dev/null || missing "$clang"
  [ -f /usr/lib/wasm32-wasi/libc.a ] || missing "wasi-libc"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  c_component() {
    (cd "$repo" && "${CARGO:-cargo}" run --quiet -p sandpiper-c-component -- "$@")
  }
  c_component bindings --wit "$wit" --world "$world" --out-dir "$work/bindings"
  # A reactor: the host calls exports, there is no main. Warnings are errors
  # so a unit that C would silently miscompile does not build.
  "$clang" --target=wasm32-wasi -mexec-model=reactor -std=c11 -O2 \
    -Wall -Wextra -Werror \
    -I "$work/bindings" -I "$repo/guest-sdk/c" \
    -o "$work/core.wasm" \
    "$@" "$repo/guest-sdk/c/sandpiper.c" \
    "$work/bindings/bindings.c" "$work/bindings/bindings_component_type.o" \
    -Wl,--strip-debug
  c_component component "$work/core.wasm" -o "$out"
  ;;
*)
  usage
  ;;
esac
