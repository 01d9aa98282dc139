#!/usr/bin/env bash
# On a machine with several GPUs: the multi-rank programs on NCCL, one rank per GPU.
#   scripts/multigpu_check.sh [OUT_DIR] [RANKS]   (default: $OUT or ./out; every GPU)
# benchmarks/multigpu.py first (HOSTIR_CHECK_BENCH=0 skips it), then the correctness runs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR="${1:-${OUT:-out}}"
mkdir -p "$OUTDIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HOSTIR_CACHE_DIR="${HOSTIR_CACHE_DIR:-/tmp/hostir-cache}"
export HOSTIR_PYTHON="$(command -v "${HOSTIR_PYTHON:-python3}")"  # absolute: mpirun's ranks may see another PATH
N="${2:-$("$HOSTIR_PYTHON" -c 'import torch; print(torch.cuda.device_count())')}"
status=0
run() {  # name, then the command (each bounded: a hang is a failure, not the end of the run)
  local name="$1"; shift
  echo "== $name"
  timeout "${HOSTIR_CHECK_TIMEOUT:-120}" "$@" > "$OUTDIR/$name.log" 2>&1 || { status=1; echo "FAILED: $name"; }
  grep -E " ok \(| ok$|matches torch|Error|error" "$OUTDIR/$name.log" | grep -v "^rank [1-9]" | tail -8
}
# the figures first (HOSTIR_CHECK_BENCH=0 skips them): benchmarks/multigpu.py writes multigpu.json/.md
if [ "${HOSTIR_CHECK_BENCH:-1}" = 1 ]; then
  HOSTIR_CHECK_TIMEOUT="${HOSTIR_BENCH_TIMEOUT:-300}" run bench_multigpu \
    scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" benchmarks/multigpu.py --out "$OUTDIR"
  cat "$OUTDIR/multigpu.md" 2>/dev/null
fi
run collectives_nccl scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" tests/mpi/collectives.py
run collectives_mpi env HOSTIR_COMM_BACKEND=mpi scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" tests/mpi/collectives.py
run sharded_nccl scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" tests/mpi/sharded.py
run layouts_nccl scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" tests/mpi/layouts.py
run dtensors_nccl scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" tests/mpi/dtensors.py
run pipelined_nccl scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" tests/mpi/pipelined.py 1 3
run meshes_nccl env HOSTIR_CHECK_PROGRAM=1 scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" tests/mpi/meshes.py
for p in mlp allgather_linear linear_reduce_scatter; do
  run "launch_$p" scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" "launch/$p.py"
done
# a trace of the pipelined allgather + linear (HOSTIR_TRACE), every rank in one file, and its timeline
run trace_allgather_linear env HOSTIR_TRACE="$OUTDIR/trace_ag_linear.json" \
  scripts/mpirun.sh "$N" "$HOSTIR_PYTHON" launch/allgather_linear.py --steps 3
"$HOSTIR_PYTHON" -m hostir trace merge "$OUTDIR/trace_ag_linear_all.json" "$OUTDIR"/trace_ag_linear.rank*.json \
  && "$HOSTIR_PYTHON" -m hostir trace plot "$OUTDIR/trace_ag_linear_all.json" "$OUTDIR/trace_ag_linear.png" --last 8 \
  || { status=1; echo "FAILED: trace merge/plot"; }
run torchrun_mlp "$HOSTIR_PYTHON" -m torch.distributed.run --nproc_per_node="$N" launch/mlp.py
exit $status
