#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs the pinned toolchains
# that build the Python, JavaScript and C example units and the pinned test
# tools (idempotent: a quick check when they are there), then runs every
# test in the workspace.
# Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-guest-toolchains.sh
scripts/install-test-tools.sh
exec cargo test --workspace "$@"
