#!/usr/bin/env bash
# Wall time of whole training epochs, two gradwire binaries alternating:
#   experiments/bench/epoch.sh [--config FILE] [--rounds N] [--out DIR] NAME=BINARY NAME=BINARY ...
# Each round trains the config (default configs/resnet20-fashion.yaml: ResNet-20 on
# Fashion-MNIST, one epoch) once with every binary, in the order given, into a fresh
# run directory; the data come from GRADWIRE_DATA as for any run. Prints one CSV line
# per run (name, round, wall_seconds of the training epochs from summary.json,
# samples/s, test accuracy) and, at the end, each binary's best and median. The runs
# go to DIR (default: a temporary folder, removed).
set -euo pipefail
cd "$(dirname "$0")/../.."
config=configs/resnet20-fashion.yaml rounds=2 out=""
while [ $# -gt 0 ]; do
  case $1 in
    --config) config=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "epoch.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "epoch.sh: name at least one NAME=BINARY (see --help)" >&2; exit 2; }
for nb in "$@"; do
  case $nb in *=*) ;; *) echo "epoch.sh: $nb: expected NAME=BINARY" >&2; exit 2 ;; esac
  [ -x "${nb#*=}" ] || { echo "epoch.sh: ${nb#*=}: not an executable" >&2; exit 2; }
done
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"
csv="$out/epochs.csv"
echo "name,round,wall_seconds,samples_per_second,test_accuracy" | tee "$csv"
for r in $(seq 1 "$rounds"); do
  for nb in "$@"; do
    name=${nb%%=*} bin=${nb#*=} dir="$out/$name-$r"
    "$bin" train --config "$config" --set train.progress=false --out "$dir" > "$dir.json" 2> "$dir.log" ||
      { echo "epoch.sh: $name round $r failed; log: $dir.log" >&2; exit 1; }
    /usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("%s,%s,%.1f,%.1f,%s" % (sys.argv[2], sys.argv[3], s["wall_seconds"], s["samples_per_second"], s.get("test_accuracy")))' \
      "$dir/summary.json" "$name" "$r" | tee -a "$csv"
  done
done
/usr/bin/python3 - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for name in dict.fromkeys(r["name"] for r in rows):
    w = [float(r["wall_seconds"]) for r in rows if r["name"] == name]
    print(f"{name}: best {min(w):.1f} s, median {statistics.median(w):.1f} s over {len(w)} runs")
PY
