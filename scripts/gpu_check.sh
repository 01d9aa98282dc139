#!/usr/bin/env bash
# On a GPU machine: the GPU test suites and the benchmarks in one command.
#   scripts/gpu_check.sh [OUT_DIR] [all|tests|bench|shapes|draw]   (default: $OUT, else ./out; all)
# Logs and result tables are written under OUT_DIR. `tests` runs the test suites
# alone, `bench` the benchmarks and the main job (two calls of a time-limited runner);
# `shapes` the reduction sweep beyond issue 11's listed shapes (SHAPES_ONLY=regex keeps
# some of its cases: it is long); `draw` DRAW_N reductions of shapes drawn at random
# (default 24; DRAW_SEED replays a draw), which `bench` runs a dozen of. HOSTIR_TEST_KNOBS="rows.X=4 cuda_outer.Y=True" runs
# the tests with those codegen constants set (tests/conftest.py): a knob's kernels
# against torch before it becomes the default. GPU_TEST_WORKERS: pytest workers (default 8).
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR="${1:-${OUT:-out}}"
mkdir -p "$OUTDIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HOSTIR_CACHE_DIR="${HOSTIR_CACHE_DIR:-/tmp/hostir-cache}"
PY="${HOSTIR_PYTHON:-python3}"
PART="${2:-all}"
status=0
nvidia-smi > "$OUTDIR/nvidia-smi.txt" 2>&1 || true
"$PY" -c "import torch, cuda.bindings, cuda.core; print(torch.__version__, torch.cuda.get_device_name())" | tee "$OUTDIR/env.txt"
if [ "$PART" = draw ]; then
  "$PY" benchmarks/reduction_shapes.py --out "$OUTDIR/draw" --draw "${DRAW_N:-24}" ${DRAW_SEED:+--seed "$DRAW_SEED"} 2>&1 \
    | tee "$OUTDIR/bench_draw.log" | tail -40 || status=1
  exit $status
fi
if [ "$PART" = shapes ]; then
  "$PY" benchmarks/reduction_shapes.py --out "$OUTDIR" ${SHAPES_ONLY:+--only "$SHAPES_ONLY"} 2>&1 \
    | tee "$OUTDIR/bench_shapes.log" | tail -60 || status=1
  exit $status
fi
if [ "$PART" != bench ]; then
echo "== GPU tests: op and random-fusion tests on cuda through generated kernels, plus gpu-marked tests"
HOSTIR_TEST_DEVICE=cuda HOSTIR_TEST_NVRTC=0 "$PY" -m pytest -q -p no:cacheprovider -n "${GPU_TEST_WORKERS:-8}" \
  tests/test_ops_pointwise.py tests/test_ops_shape.py tests/test_ops_reduction.py \
  tests/test_kernels.py tests/test_host_ir.py tests/test_host_memory.py tests/test_fuzz.py \
  tests/test_ops_scan.py tests/test_ops_indexing.py tests/test_ops_random.py tests/test_seed003.py tests/test_trace.py \
  tests/test_repro.py tests/test_ops_float8.py tests/test_ops_aten.py tests/test_programs.py \
  tests/test_ops_norms.py tests/test_word_rows.py 2>&1 | tee "$OUTDIR/gpu_tests.log" | tail -25 || status=1
fi
[ "$PART" = tests ] && exit $status
echo "== benchmarks"
"$PY" benchmarks/pointwise.py --out "$OUTDIR" 2>&1 | tee "$OUTDIR/bench_pointwise.log" | tail -20 || status=1
"$PY" benchmarks/reduction.py --out "$OUTDIR" 2>&1 | tee "$OUTDIR/bench_reduction.log" | tail -20 || status=1
"$PY" benchmarks/reduction_shapes.py --out "$OUTDIR/draw" --draw 12 2>&1 | tee "$OUTDIR/bench_draw.log" | tail -16 || status=1
"$PY" benchmarks/scan.py --out "$OUTDIR" 2>&1 | tee "$OUTDIR/bench_scan.log" | tail -12 || status=1
"$PY" benchmarks/indexing.py --out "$OUTDIR" 2>&1 | tee "$OUTDIR/bench_indexing.log" | tail -10 || status=1
"$PY" benchmarks/random_ops.py --out "$OUTDIR" 2>&1 | tee "$OUTDIR/bench_random.log" | tail -8 || status=1
[ "${HOSTIR_TUNE:-0}" = 1 ] && { "$PY" benchmarks/tune_pointwise.py --out "$OUTDIR" 2>&1 | tail -9 || status=1; }
"$PY" benchmarks/compile_time.py --out "$OUTDIR" 2>&1 | tail -14 || status=1
echo "== main job"
./run.sh 2>&1 | tail -3 | tee "$OUTDIR/run_sh.log" || status=1
"$PY" benchmarks/host_overhead.py --out "$OUTDIR" 2>&1 | tee "$OUTDIR/bench_host.log" | tail -15 || status=1
exit $status
