#!/usr/bin/env bash
# The test suite (CPU; GPU tests run too when a GPU is present).
source "$(dirname "$0")/scripts/env.sh"
exec "$HOSTIR_PYTHON" -m pytest -q -n "${HOSTIR_TEST_WORKERS:-2}" "$@"
