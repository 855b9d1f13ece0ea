#!/usr/bin/env bash
# Wall time of width-1 and width-2 training on the MPI backend, alternating:
#   experiments/bench/pipeline-mpi.sh [--binary GRADWIRE] [--np N] [--rounds N] [--btl LIST] [--mpirun "ARGS"] [--out DIR] [-- --set KEY=VALUE ...]
# Each round trains configs/lenet5-fashion.yaml for one epoch on N ranks (default 2, one
# logical worker each) with dist.pipeline 1, then 2, over OpenMPI's transports LIST (default
# "vader,self tcp,self": shared memory, then TCP over loopback). GRADWIRE (default ./gradwire)
# must be built with -tags mpi; data from GRADWIRE_DATA; ARGS go to mpirun (e.g. "--bind-to none"). Prints one CSV line per run
# (btl, width, round, wall_seconds of the training epoch, compute seconds per step, test
# accuracy) and at the end each (btl, width)'s best and median wall time and their ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=./gradwire np=2 rounds=3 btls="vader,self tcp,self" out="" mpiargs=""
while [ $# -gt 0 ]; do
  case $1 in
    --binary) bin=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --btl) btls=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --mpirun) mpiargs=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pipeline-mpi.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "pipeline-mpi.sh: $bin: not an executable (build with go build -tags mpi -o gradwire ./cmd/gradwire)" >&2; exit 2; }
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"
csv="$out/pipeline-mpi.csv"
echo "btl,width,round,wall_seconds,compute_seconds_per_step,test_accuracy" | tee "$csv"
for r in $(seq 1 "$rounds"); do
  for btl in $btls; do
    for width in 1 2; do
      dir="$out/${btl%%,*}-w$width-$r"
      # shellcheck disable=SC2086 # ARGS are split on purpose
      mpirun --allow-run-as-root -np "$np" --mca btl "$btl" $mpiargs "$bin" train --config configs/lenet5-fashion.yaml \
        --set dist.backend=mpi --set dist.workers="$np" --set train.epochs=1 --set dist.pipeline="$width" \
        --set train.progress=false "$@" --out "$dir" > "$dir.json" 2> "$dir.log" ||
        { echo "pipeline-mpi.sh: $btl width $width round $r failed; log: $dir.log" >&2; exit 1; }
      /usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("%s,%s,%s,%.2f,%.5f,%s" % (sys.argv[2], sys.argv[3], sys.argv[4], s["wall_seconds"], s["time_model"]["compute_seconds_per_step"], s.get("test_accuracy")))' \
        "$dir/summary.json" "${btl%%,*}" "$width" "$r" | tee -a "$csv"
    done
  done
done
/usr/bin/python3 - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for btl in dict.fromkeys(r["btl"] for r in rows):
    t = {w: sorted(float(r["wall_seconds"]) for r in rows if r["btl"] == btl and r["width"] == w) for w in ("1", "2")}
    print("%s: width 1 best %.2f s, median %.2f s; width 2 best %.2f s, median %.2f s; width 2 / width 1: %.3f (best), %.3f (median)" % (
        btl, t["1"][0], statistics.median(t["1"]), t["2"][0], statistics.median(t["2"]),
        t["2"][0] / t["1"][0], statistics.median(t["2"]) / statistics.median(t["1"])))
PY
