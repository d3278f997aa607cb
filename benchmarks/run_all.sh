#!/usr/bin/env bash
# Run every aiograd benchmark; each prints JSON lines (an env line, results, a ratios line).
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset for these commands only.
# Extra arguments (e.g. --threads 1) are passed to every script.
# The benchmarks that compare single-threaded work run pinned to one vCPU
# (AIOGRAD_BENCH_CPU, default 0; empty: not pinned): see "Pinning" in README.md.
# service.py is never pinned: its subject is two cores shared by threads.
# --report (first argument): also save the lines to benchmarks/latest.jsonl and write the
# table of latest figures into benchmarks/README.md and docs/benchmarks.md (report.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
if [[ "${1-}" == --report ]]; then
    shift
    "$0" "$@" | tee benchmarks/latest.jsonl
    exec "$PY" benchmarks/report.py benchmarks/latest.jsonl
fi
CPU=${AIOGRAD_BENCH_CPU-0}
PIN=()
if [[ -n "$CPU" ]] && command -v taskset >/dev/null; then
    PIN=(taskset -c "$CPU")
fi
for script in engine_overhead mlp_step memory service checkpoint_memory; do
    echo "# benchmarks/${script}.py" >&2
    if [[ "$script" == service ]]; then
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" "benchmarks/${script}.py" "$@"
    else
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${PIN[@]}" "$PY" "benchmarks/${script}.py" "$@"
    fi
done
