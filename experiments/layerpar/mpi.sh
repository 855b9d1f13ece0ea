#!/bin/sh
# The layer-parallel sweep's al-k2, al-k4 and serial-dp2 runs under mpirun, one rank per stage
# (worker), into experiments/results/layerpar-resnet20-fashion/mpi/<name>, then mpi/table.md.
# Needs the mpi build: go build -tags "mpi openblas" -o gradwire-mpi ./cmd/gradwire
# Run from the repository root: GW=./gradwire-mpi sh experiments/layerpar/mpi.sh
set -e
GW=${GW:-./gradwire-mpi}
OUT=experiments/results/layerpar-resnet20-fashion/mpi
COMMON="--set data.train_limit=6000 --set data.global_batch=64 --set train.epochs=8 --set train.eval_limit=2000
  --set train.checkpoint=false --set layer_parallel.u_curvature=0.03 --set train.progress=false --set dist.backend=mpi"
MPIRUN="mpirun --oversubscribe --allow-run-as-root --mca btl_vader_single_copy_mechanism none"
run() {
  name=$1; np=$2; shift 2
  mkdir -p "$OUT"
  $MPIRUN -np "$np" "$GW" train --config configs/resnet20-fashion.yaml $COMMON "$@" --out "$OUT/$name" --overwrite \
    > /dev/null 2> "$OUT/$name.log"
}
run al-k2 2 --set train.mode=layer_parallel --set dist.workers=2 --set layer_parallel.rho=0.003
run al-k4 4 --set train.mode=layer_parallel --set dist.workers=4 --set layer_parallel.rho=0.003
run serial-dp2 2 --set dist.workers=2
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
rows = ["| run (mpirun) | ranks | test accuracy (%) | wall time (s) | s per parallel round | initial pass (s) | aux MB sent | params MB sent | predicted round speed-up |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
for name in ["al-k2", "al-k4", "serial-dp2"]:
    p = os.path.join(out, name, "summary.json")
    if not os.path.exists(p):
        continue
    s = json.load(open(p))
    lp = s.get("layer_parallel") or {}
    per = lp["parallel_seconds"] / lp["parallel_rounds"] if lp else None
    f = lambda v, d: "" if v is None else f"{v:.{d}f}"
    rows.append(f"| {name} | {s['workers']} | {100*s['test_accuracy']:.2f} | {s['wall_seconds']:.0f} | {f(per,1)} | "
                f"{f(lp.get('init_seconds'),1)} | {f(lp['aux_bytes']/1e6 if lp else None,1)} | {f(lp['param_bytes']/1e6 if lp else None,1)} | "
                f"{f(lp.get('predicted_round_speedup'),2)} |")
open(os.path.join(out, "table.md"), "w").write("# layerpar-resnet20-fashion under mpirun\n\nProduced by experiments/layerpar/mpi.sh on the machine of the in-process sweep (2 cores, shared with other jobs).\n\n" + "\n".join(rows) + "\n")
PY
cat "$OUT/table.md"
