#!/usr/bin/env bash
# Same-run speed comparison: gradwire (pure Go and OpenBLAS builds) against PyTorch
# on the same models, shapes and training step, back to back on this machine.
# Needs libopenblas-dev and python3-torch (Debian). Usage, from the repository root:
#   experiments/bench/run.sh [--batch 64] [--steps 20]
# Writes experiments/bench/results.csv and experiments/bench/results.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
batch=64 steps=20
while [ $# -gt 0 ]; do
  case $1 in
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1 (expected --batch N, --steps N)" >&2; exit 2 ;;
  esac
done
out=experiments/bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

CGO_ENABLED=0 go build -o "$tmp/gradwire-purego" ./cmd/gradwire
go build -tags openblas -o "$tmp/gradwire-openblas" ./cmd/gradwire

# Two cores for everyone: GOMAXPROCS=2 for Go, one OpenBLAS thread per Go
# worker (gradwire's ops split the batch), two intra-op threads for PyTorch.
# Model by model, the three back to back, so that a change in the machine's
# load between models does not skew one side's figures.
export GOMAXPROCS=2
for m in mlp lenet5 resnet20 lstm charlstm; do
  "$tmp/gradwire-openblas" bench --model $m --batch "$batch" --steps "$steps" --format csv > "$tmp/openblas-$m.csv"
  /usr/bin/python3 "$out/pytorch_bench.py" --batch "$batch" --steps "$steps" --threads 2 $m > "$tmp/pytorch-$m.csv"
  "$tmp/gradwire-purego" bench --model $m --batch "$batch" --steps "$steps" --format csv > "$tmp/purego-$m.csv"
done
for side in openblas pytorch purego; do
  head -1 "$tmp/$side-mlp.csv" > "$tmp/$side.csv"
  for m in mlp lenet5 resnet20 lstm charlstm; do tail -n +2 "$tmp/$side-$m.csv" >> "$tmp/$side.csv"; done
done

/usr/bin/python3 - "$tmp" "$out" "$batch" "$steps" "$("$tmp/gradwire-openblas" version)" <<'PY'
import csv, os, platform, sys, datetime, subprocess
tmp, out, batch, steps, version = sys.argv[1:6]
def load(name):
    with open(os.path.join(tmp, name + ".csv")) as f:
        return {r["model"]: r for r in csv.DictReader(f)}
ob, pg, pt = load("openblas"), load("purego"), load("pytorch")
import torch
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
machine = f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.machine()}"
rows = []
for m in pt:
    t = float(pt[m]["samples_per_second"])
    o, p = float(ob[m]["samples_per_second"]), float(pg[m]["samples_per_second"])
    rows.append(dict(model=m, batch=batch, params=ob[m]["params"], pytorch_params=pt[m]["params"], pytorch=t, openblas=o, purego=p,
                     openblas_ratio=o / t, purego_ratio=p / t,
                     openblas_alloc_mb=float(ob[m]["alloc_bytes_per_step"]) / 1e6,
                     purego_alloc_mb=float(pg[m]["alloc_bytes_per_step"]) / 1e6,
                     openblas_gflops=float(ob[m]["gflop_per_second"])))
with open(os.path.join(out, "results.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader(); w.writerows(rows)
with open(os.path.join(out, "results.md"), "w") as f:
    f.write(f"# Training-step throughput, gradwire vs PyTorch, same run\n\n")
    f.write(f"Command: `experiments/bench/run.sh --batch {batch} --steps {steps}`; {version}; "
            f"PyTorch {torch.__version__} (2 threads); GOMAXPROCS=2; {machine}; "
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.\n\n")
    f.write("| model | batch | parameters (gradwire / PyTorch) | PyTorch samples/s | gradwire openblas samples/s | ratio | gradwire pure Go samples/s | ratio | openblas GFLOP/s | allocated per step, openblas (MB) | pure Go (MB) |\n")
    f.write("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
    for r in rows:
        f.write(f"| {r['model']} | {r['batch']} | {r['params']} / {r['pytorch_params']} | {r['pytorch']:.1f} | {r['openblas']:.1f} | {r['openblas_ratio']:.2f}x | "
                f"{r['purego']:.1f} | {r['purego_ratio']:.2f}x | {r['openblas_gflops']:.2f} | {r['openblas_alloc_mb']:.2f} | {r['purego_alloc_mb']:.2f} |\n")
    f.write("\nRatio: gradwire samples/s over PyTorch samples/s measured in the same run (median step of "
            f"{steps} after 3 warm-up steps; forward, cross-entropy, backward and a plain SGD update on a fixed random batch).\n")
print(open(os.path.join(out, "results.md")).read())
PY
