#!/usr/bin/env bash
# Builds {{name}} into build/{{name}}.wasm with componentize-js, through the
# build script of the Sandpiper source tree this project was generated from
# (it holds the WIT). Install the toolchain once:
#   "$SANDPIPER_SRC/scripts/install-guest-toolchains.sh" --lang js
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
src=${SANDPIPER_SRC:-{{sdk}}}
"$src/scripts/build-unit.sh" js {{world}} build/{{name}}.wasm unit.js
echo "built build/{{name}}.wasm"
