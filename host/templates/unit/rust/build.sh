#!/usr/bin/env bash
# Builds {{name}} into build/{{name}}.wasm. Needs the Rust toolchain that
# rust-toolchain.toml pins, with its wasm32-wasip2 target (rustup adds both).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
cargo build --release --target wasm32-wasip2
mkdir -p build
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{lib}}.wasm" build/{{name}}.wasm
echo "built build/{{name}}.wasm"
