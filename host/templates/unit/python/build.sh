#!/usr/bin/env bash
# Builds {{name}} into build/{{name}}.wasm with componentize-py, through the
# build script of the Sandpiper source tree this project was generated from
# (it holds the WIT and the Python helper layer). Install the toolchain once:
#   "$SANDPIPER_SRC/scripts/install-guest-toolchains.sh" --lang python
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
src=${SANDPIPER_SRC:-{{sdk}}}
"$src/scripts/build-unit.sh" python {{world}} build/{{name}}.wasm app.py
echo "built build/{{name}}.wasm"
