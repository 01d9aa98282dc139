#!/usr/bin/env bash
# scripts/mpirun.sh N PROGRAM [ARGS...]: start PROGRAM on N ranks with the mpirun
# that goes with hostir's Python (MPICH in .venv; Open MPI on the GPU machines,
# which needs --allow-run-as-root as root and --oversubscribe past the cores).
# The rules live in one place, hostir/cli/launch.py (also behind `hostir run --ranks N`).
set -euo pipefail
exec "${HOSTIR_PYTHON:-python3}" "$(dirname "$0")/../hostir/cli/launch.py" "$@"
