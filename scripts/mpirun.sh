#!/usr/bin/env bash
# scripts/mpirun.sh N PROGRAM [ARGS...]: start PROGRAM on N ranks with the mpirun
# that goes with hostir's Python (MPICH in .venv; Open MPI on the GPU machines,
# which needs --allow-run-as-root as root and --oversubscribe past the cores).
set -euo pipefail
n="$1"; shift
py_dir="$(dirname "$(command -v "${HOSTIR_PYTHON:-python3}")")"
if [ -x "$py_dir/mpirun" ]; then MPIRUN="$py_dir/mpirun"; else MPIRUN="$(command -v mpirun)"; fi
extra=()
if "$MPIRUN" --version 2>/dev/null | grep -qi "open mpi\|openrte"; then
  extra+=(--oversubscribe)
  [ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
fi
exec "$MPIRUN" "${extra[@]}" -np "$n" "$@"
