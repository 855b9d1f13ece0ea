#!/usr/bin/env bash
# Short same-seed runs whose results must not change when the code is
# reorganised without changing the maths.
#
#   experiments/same-results.sh run OUT          train them, one run directory each under OUT
#   experiments/same-results.sh compare A B      compare two OUT folders' summary.json files
#
# The runs: the shipped lenet5 and charlstm configs (shortened), and every
# variation of the LeNet-5 compression sweep for 2 epochs of 30 steps, each
# compressor compressing within them (DGC's warm-up over the first epoch).
set -euo pipefail
cd "$(dirname "$0")/.."
gw=${GRADWIRE:-gradwire}

case "${1:-}" in
run)
  out=$2
  mkdir -p "$out"
  short=(--set train.progress=false --set train.eval_limit=1000)
  "$gw" train --config configs/lenet5-fashion.yaml "${short[@]}" --set train.epochs=1 --set train.max_steps=100 --out "$out/lenet5" >/dev/null
  "$gw" train --config configs/charlstm-shakespeare.yaml "${short[@]}" --set train.epochs=1 --set train.max_steps=60 --out "$out/charlstm" >/dev/null
  # Every compressor compresses within the 60 steps: PowerSGD from step 20,
  # GradiVeQ after 10 dense steps (then cycles of 5 fitting and 10
  # compressed), LGC after 10 dense and 10 autoencoder-training steps.
  early=(--set compress.powersgd.start_iter=20
    --set compress.gradiveq.warmup_steps=10 --set compress.gradiveq.sample_steps=5 --set compress.gradiveq.compress_steps=10
    --set compress.lgc.dense_steps=10 --set compress.lgc.train_steps=10)
  "$gw" sweep --config experiments/compression-lenet5-fashion.yaml --dry-run | grep ' seed 1 (' |
    while read -r line; do
      name=$(echo "$line" | sed -E 's/^\[[0-9]+\/[0-9]+\] ([^ ]+) seed.*/\1/')
      # The status in parentheses may hold a colon ("a retry: failed before").
      cmd=${line#*: gradwire }
      cmd=${cmd%% --out *}
      # shellcheck disable=SC2086
      eval "\"$gw\" $cmd ${short[*]} --set train.epochs=2 --set train.max_steps=30 ${early[*]} --out \"$out/sweep-$name\"" >/dev/null
      echo "$name done" >&2
    done
  ;;
compare)
  /usr/bin/env python3 - "$2" "$3" <<'PY'
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
skip = {"wall_seconds", "samples_per_second", "eval_seconds", "time_model", "version", "go_version", "machine", "data_dir"}
bad = 0
for run in sorted(os.listdir(a)):
    pa, pb = os.path.join(a, run, "summary.json"), os.path.join(b, run, "summary.json")
    if not os.path.exists(pb):
        print(f"{run}: missing in {b}"); bad += 1; continue
    sa = {k: v for k, v in json.load(open(pa)).items() if k not in skip}
    sb = {k: v for k, v in json.load(open(pb)).items() if k not in skip}
    diff = sorted(k for k in sa.keys() | sb.keys() if sa.get(k) != sb.get(k))
    if diff:
        bad += 1
        print(f"{run}: differs in " + ", ".join(f"{k} ({sa.get(k)} vs {sb.get(k)})" for k in diff))
    else:
        print(f"{run}: same (test_loss {sa['test_loss']:.6f})")
sys.exit(1 if bad else 0)
PY
  ;;
*)
  echo "usage: $0 run OUT | compare A B" >&2; exit 2 ;;
esac
