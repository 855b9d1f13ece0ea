#!/usr/bin/env bash
# Compression runs: lenet5 on Fashion-MNIST, 8 workers x batch 32, SGD momentum
# 0.9, 10 epochs, one warm-up epoch (learning rate; DGC density; PowerSGD's
# vanilla all-reduce phase = 234 steps), and charlstm on Tiny Shakespeare with 4
# workers. Usage: experiments/compression.sh [lenet5|charlstm] ; outputs in
# runs/compression/<name>/ with the summary on stdout of each run.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GRADWIRE_BIN:-./gradwire}
[ -x "$bin" ] || go build -o "$bin" ./cmd/gradwire
out=runs/compression
mkdir -p $out

run() { # name config sets...
  local name=$1 config=$2; shift 2
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  [ -f $out/$name/summary.json ] && return 0
  "$bin" train --config "$config" --set train.progress=false "${sets[@]}" --out $out/$name \
    > $out/$name.summary.json 2> $out/$name.log
}

lenet5() {
  local base=(dist.workers=8 data.batch_size=32 train.epochs=10 optim.lr=0.1 optim.momentum=0.9
    schedule.name=cosine schedule.warmup_epochs=1 compress.min_size=0 compress.dgc.warmup_epochs=1
    compress.powersgd.start_iter=234)
  local c=configs/lenet5-fashion.yaml
  run lenet5-dense $c "${base[@]}" compress.name=none
  run lenet5-dgc $c "${base[@]}" compress.name=dgc
  run lenet5-dgc-fp16 $c "${base[@]}" compress.name=dgc compress.fp16_values=true compress.dense_fp16=true
  run lenet5-adacomp $c "${base[@]}" compress.name=adacomp
  run lenet5-powersgd-r2 $c "${base[@]}" compress.name=powersgd compress.powersgd.rank=2
  run lenet5-topk $c "${base[@]}" compress.name=topk compress.residual=true
  run lenet5-topk-noresidual $c "${base[@]}" compress.name=topk compress.residual=false
  run lenet5-dgc-nomc $c "${base[@]}" compress.name=dgc compress.dgc.momentum_correction=false
  run lenet5-dgc-nomask $c "${base[@]}" compress.name=dgc compress.dgc.factor_masking=false
}

charlstm() {
  local base=(dist.workers=4 data.batch_size=32 train.epochs=3 compress.min_size=0
    compress.dgc.warmup_epochs=1 compress.powersgd.start_iter=122 compress.powersgd.rank=2
    compress.dgc.momentum_correction=false)
  local c=configs/charlstm-shakespeare.yaml
  run charlstm-dense $c "${base[@]}" compress.name=none
  run charlstm-dgc $c "${base[@]}" compress.name=dgc
  run charlstm-adacomp $c "${base[@]}" compress.name=adacomp
  run charlstm-powersgd $c "${base[@]}" compress.name=powersgd
}

"${1:-lenet5}"
