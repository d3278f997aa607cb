#!/usr/bin/env bash
# Issue 22's device check, in one go, on a CUDA machine (e.g. the H200 device machine:
# Python 3.12, CuPy 14, torch with CUDA; no trio or pytest-asyncio unless carried as
# wheels, so only the synchronous CUDA tests are selected). Run from the repository root:
#     bash benchmarks/gpu_device_check.sh
# Writes under $OUT (default ./gpu_check_out): env.txt, tests.log, gpu.jsonl.
set -uo pipefail
out="${OUT:-./gpu_check_out}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  "$py" -c 'import sys, numpy, cupy, torch; print(sys.version); print("numpy", numpy.__version__, "cupy", cupy.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1
} > "$out/env.txt"
# The CUDA tests (tests/test_cuda*.py), against the NumPy path and torch on CUDA.
timeout 300 "$py" -m pytest -q -p no:cacheprovider tests/test_cuda*.py -x \
  > "$out/tests.log" 2>&1
echo "tests rc=$?" >> "$out/env.txt"
# The benchmark: the five CUDA workloads and the CPU CNN, against torch in-process.
timeout 240 "$py" benchmarks/gpu.py --rounds 20 > "$out/gpu.jsonl" 2>&1
echo "gpu.py rc=$?" >> "$out/env.txt"
tail -n 3 "$out/env.txt" "$out/tests.log" "$out/gpu.jsonl"
