#!/usr/bin/env bash
# Speed comparison: gradwire (pure-Go and OpenBLAS builds) against PyTorch on
# the same models, shapes and training step, in interleaved processes on this
# machine. Needs libopenblas-dev and python3-torch (Debian; run with
# /usr/bin/python3). From the repository root:
#   experiments/bench/run.sh [--models mlp,lenet5,...] [--batch 64] [--steps 10] [--warmup 20]
#       [--trials 5] [--processes 3] [--probe-trials 2] [--max-spread 1.5]
#       [--settings NAME,...] [--quick] [--out DIR]
# --help describes the method (experiments/bench/compare.py does the runs).
# Writes DIR/results.csv and DIR/results.md (DIR defaults to experiments/bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
# Options are checked before the builds, so that a typo fails at once.
"$py" experiments/bench/compare.py --validate "$@"
for a in "$@"; do case $a in -h|--help) exit 0 ;; esac; done
"$py" -c 'import torch' 2>/dev/null || { echo "run.sh: $py cannot import torch (apt-get install python3-torch)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/gradwire-purego" ./cmd/gradwire
go build -tags openblas -o "$tmp/gradwire-openblas" ./cmd/gradwire
"$py" experiments/bench/compare.py --bin-openblas "$tmp/gradwire-openblas" --bin-purego "$tmp/gradwire-purego" "$@"
