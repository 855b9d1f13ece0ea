#!/usr/bin/env bash
# Reproduces the single-worker results table of the README: each shipped config
# once, logs and summaries in runs/foundation/. Needs GRADWIRE_DATA (or data.dir)
# pointing at Fashion-MNIST and Tiny Shakespeare. The table was measured with
# the pure-Go build for mlp and lenet5 and the openblas build
# (OPENBLAS_CORETYPE=SkylakeX) for lstm, resnet20 and charlstm.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GRADWIRE_BIN:-./gradwire}
[ -x "$bin" ] || go build -o "$bin" ./cmd/gradwire
mkdir -p runs/foundation
for c in mlp-fashion lenet5-fashion lstm-fashion resnet20-fashion charlstm-shakespeare; do
  "$bin" train --config configs/$c.yaml --set train.progress=false --out runs/foundation/$c \
    > runs/foundation/$c.summary.json 2> runs/foundation/$c.log
  echo "$c: $(grep -E '"(test_accuracy|test_loss|wall_seconds|samples_per_second)"' runs/foundation/$c.summary.json | tr -d '\n ')"
done
