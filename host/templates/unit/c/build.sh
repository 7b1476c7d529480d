#!/usr/bin/env bash
# Builds {{name}} into build/{{name}}.wasm with clang and wasi-libc, through
# the build script of the Sandpiper source tree this project was generated
# from (it holds the WIT, the C helper layer and the component tool).
# Install the toolchain once:
#   "$SANDPIPER_SRC/scripts/install-guest-toolchains.sh" --lang c
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
src=${SANDPIPER_SRC:-{{sdk}}}
"$src/scripts/build-unit.sh" c {{world}} build/{{name}}.wasm unit.c
echo "built build/{{name}}.wasm"
