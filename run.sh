#!/usr/bin/env bash
# The main job: defines a fusion, prints its IR and runs it (GPU when present, else CPU).
source "$(dirname "$0")/scripts/env.sh"
exec "$HOSTIR_PYTHON" launch/demo.py "$@"
