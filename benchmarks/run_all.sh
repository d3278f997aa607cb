#!/usr/bin/env bash
# Run every aiograd benchmark; each prints JSON lines (an env line, results, a ratios line).
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset for these commands only.
# Extra arguments (e.g. --threads 1) are passed to every script.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
for script in engine_overhead mlp_step memory service checkpoint_memory; do
    echo "# benchmarks/${script}.py" >&2
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" "benchmarks/${script}.py" "$@"
done
