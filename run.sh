#!/usr/bin/env bash
# The main job: a tensor-parallel MLP block on 2 ranks under mpirun, its tokens
# pipelined over CUDA streams in chunks (GPUs when present, else CPU), checked
# against torch. `./run.sh --steps 50 --chunks 4` passes options on.
source "$(dirname "$0")/scripts/env.sh"
exec scripts/mpirun.sh 2 "$HOSTIR_PYTHON" launch/mlp.py "$@"
