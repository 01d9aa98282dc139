# Sourced by run.sh and test.sh: find or make a Python environment with hostir's needs.
# On a machine that already has torch (the GPU machines), use that Python as it is;
# otherwise make .venv and install a pinned CPU torch plus the rest from PyPI.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ -z "${HOSTIR_PYTHON:-}" ]; then
  if python3 -c "import torch, numpy, pytest, hypothesis" >/dev/null 2>&1; then
    HOSTIR_PYTHON="$(command -v python3)"  # absolute: mpirun's ranks may see another PATH
  else
    if [ ! -x .venv/bin/python ]; then
      python3 -m venv .venv
    fi
    HOSTIR_PYTHON="$ROOT/.venv/bin/python"
    if ! "$HOSTIR_PYTHON" -c "import torch, numpy, pytest, hypothesis, xdist, pytest_timeout, cuda.bindings, mpi4py, matplotlib" >/dev/null 2>&1; then
      echo "hostir: installing dependencies into .venv (CPU torch 2.13.0, pinned)" >&2
      "$HOSTIR_PYTHON" -m pip install -q --upgrade pip >/dev/null
      "$HOSTIR_PYTHON" -m pip install -q "torch==2.13.0" numpy pytest hypothesis pytest-xdist \
        pytest-timeout cuda-python nvidia-cuda-nvrtc mpi4py mpich matplotlib
    fi
  fi
fi
export HOSTIR_PYTHON
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# Multi-GPU hosts: keep NVLink multicast off (see DEVELOPERS notes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
