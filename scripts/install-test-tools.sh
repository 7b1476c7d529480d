#!/usr/bin/env bash
# Installs the pinned tools the test suite runs besides cargo's, idempotently
# (a quick version check when they are there):
#
#   openapi-spec-validator, from PyPI, in a virtualenv: the API test
#   `the_openapi_document_validates` checks the served OpenAPI document
#   with it, the validator engines' OpenAPI generators use.
#   schemathesis, from PyPI, in a virtualenv of its own (its jsonschema
#   pins are not the validator's): the end-to-end test
#   `tests/e2e/schemathesis.rs` fuzzes every route with every role.
#
# Everything lands in $SANDPIPER_TEST_TOOLS (default target/test-tools).
# Needs python3 with venv.
set -euo pipefail

OPENAPI_SPEC_VALIDATOR_VERSION=0.7.2
SCHEMATHESIS_VERSION=4.32.5

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=${SANDPIPER_TEST_TOOLS:-$repo/target/test-tools}
mkdir -p "$tools"

say() { printf 'install-test-tools: %s\n' "$*"; }

python=$tools/python
installed=$("$python/bin/pip" show openapi-spec-validator 2>/dev/null || true)
if ! grep -qx "Version: $OPENAPI_SPEC_VALIDATOR_VERSION" <<<"$installed"; then
  say "pip install openapi-spec-validator==$OPENAPI_SPEC_VALIDATOR_VERSION"
  python3 -m venv "$python"
  "$python/bin/pip" install --quiet --disable-pip-version-check \
    "openapi-spec-validator==$OPENAPI_SPEC_VALIDATOR_VERSION"
fi

fuzzer=$tools/schemathesis
installed=$("$fuzzer/bin/pip" show schemathesis 2>/dev/null || true)
if ! grep -qx "Version: $SCHEMATHESIS_VERSION" <<<"$installed"; then
  say "pip install schemathesis==$SCHEMATHESIS_VERSION"
  python3 -m venv "$fuzzer"
  "$fuzzer/bin/pip" install --quiet --disable-pip-version-check \
    "schemathesis==$SCHEMATHESIS_VERSION"
fi
