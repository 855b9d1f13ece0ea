"""Interleaved speed comparison of gradwire (OpenBLAS and pure-Go builds) and
PyTorch, one training step of the same models and shapes; run by run.sh,
which builds the two gradwire binaries first.

Per model:
  1. First pass: one PyTorch process per thread setting (listed below), each
     --warmup steps then --probe-trials trials; the setting with the fastest
     median trial is kept for the model (PyTorch's speed on this machine
     depends on it by up to 10x or more: its OpenMP pool, OpenBLAS's own pool
     and spinning waits compete for two cores). A process that runs 5x
     longer than the model's fastest one so far is stopped (PROBE_CAP).
  2. --processes rounds of: gradwire-openblas, PyTorch, gradwire-purego,
     PyTorch; one model per process, each --warmup steps then --trials trials
     of --steps timed steps. PyTorch gets two processes a round because its
     speed is set per process (a process stays fast or slow), so it needs more
     of them to be sampled; interleaving spreads changes in the machine's load
     over all sides.
Per side, over all its trials of the comparison: best trial, median trial,
median / best and slowest / fastest. The ratios (gradwire samples/s over
PyTorch samples/s, of the bests and of the medians) are printed only when both
sides' median trial is within --max-spread of their best (benchstats.stable);
otherwise the cell names the unstable side.

Writes DIR/results.csv (every trial of every process, first pass included)
and DIR/results.md.
"""
import argparse
import csv
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the repository
import benchstats  # noqa: E402 (next to this file)

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["mlp", "lenet5", "resnet20", "lstm", "charlstm"]

# Thread settings tried for PyTorch (Debian's 1.13: libgomp for intra-op
# loops, OpenBLAS with its own pthread pool for matrix products, oneDNN for
# convolutions). At most two threads per pool, inter-op threads 1 throughout.
# "default" leaves the libraries' own waits (libgomp spins a while, then
# sleeps; OpenBLAS starts one thread per core): the setting of the earlier
# one-shot comparison. OMP_WAIT_POLICY only matters with two intra-op threads.
SETTINGS = {
    "t1-blas1": ({"OPENBLAS_NUM_THREADS": "1"}, 1),
    "t1-blas2": ({"OPENBLAS_NUM_THREADS": "2"}, 1),
    "t2-passive-blas1": ({"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": "1"}, 2),
    "t2-passive-blas2": ({"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": "2"}, 2),
    "t2-active-blas1": ({"OMP_WAIT_POLICY": "ACTIVE", "OPENBLAS_NUM_THREADS": "1"}, 2),
    "t2-active-blas2": ({"OMP_WAIT_POLICY": "ACTIVE", "OPENBLAS_NUM_THREADS": "2"}, 2),
    "t2-default": ({}, 2),
}
# A first-pass process still running after PROBE_CAP times the wall time of
# the fastest first-pass process of its model is stopped: its steps are then
# slower on average than the fastest setting's by more than that factor (the
# fixed start-up cost only widens the gap), so it cannot be kept, and the
# worst settings would otherwise cost minutes per model. The settings are in
# the order that tends to find a fast one first.
PROBE_CAP = 5
INTEROP_THREADS = 1

# Variables that change thread pools: cleared for every process so that the
# caller's environment does not leak into a setting or into gradwire (whose
# OpenBLAS build sets one BLAS thread per Go worker unless
# OPENBLAS_NUM_THREADS is set).
THREAD_ENV = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_DYNAMIC", "GOMP_SPINCOUNT", "KMP_BLOCKTIME",
              "KMP_AFFINITY", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOMAXPROCS")

DEFAULTS = dict(batch=64, steps=10, warmup=20, trials=5, processes=3, probe_trials=2)
QUICK = dict(batch=64, steps=3, warmup=2, trials=2, processes=1, probe_trials=1)

SIDE_NAMES = {"openblas": "gradwire openblas", "purego": "gradwire pure Go", "pytorch": "PyTorch"}


def parse_args(argv):
    settings = "\n".join(f"  {name:17} {setting_text(name)}" for name in SETTINGS)
    p = argparse.ArgumentParser(prog="experiments/bench/run.sh", description=__doc__,
                                epilog=f"PyTorch thread settings (inter-op threads {INTEROP_THREADS} in all):\n{settings}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated (default all: %(default)s)")
    for k, v in DEFAULTS.items():
        p.add_argument("--" + k.replace("_", "-"), type=int, default=None, help=f"default {v}; --quick {QUICK[k]}")
    p.add_argument("--max-spread", type=float, default=1.5,
                   help="largest median / best trial ratio of a side that still gets a ratio (default %(default)s)")
    p.add_argument("--settings", default=",".join(SETTINGS),
                   help="PyTorch thread settings of the first pass, comma-separated (default all: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()) +
                        " unless given; the figures mean nothing")
    p.add_argument("--out", default=HERE, help="folder for results.csv and results.md (default experiments/bench)")
    p.add_argument("--bin-openblas", help=argparse.SUPPRESS)
    p.add_argument("--bin-purego", help=argparse.SUPPRESS)
    p.add_argument("--validate", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for k, v in (QUICK if a.quick else DEFAULTS).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    for k, lo in (("batch", 1), ("steps", 1), ("warmup", 0), ("trials", 1), ("processes", 1), ("probe_trials", 1)):
        if getattr(a, k) < lo:
            p.error(f"--{k.replace('_', '-')} {getattr(a, k)}: expected >= {lo}")
    if not a.max_spread >= 1:
        p.error(f"--max-spread {a.max_spread}: expected >= 1 (median over best trial)")
    a.models = a.models.split(",")
    for m in a.models:
        if m not in MODELS:
            p.error(f"--models: unknown model {m!r}; expected some of {', '.join(MODELS)}")
    a.settings = a.settings.split(",")
    for s in a.settings:
        if s not in SETTINGS:
            p.error(f"--settings: unknown setting {s!r}; expected some of {', '.join(SETTINGS)}")
    if not a.validate and not (a.bin_openblas and a.bin_purego):
        p.error("--bin-openblas and --bin-purego are set by run.sh: run experiments/bench/run.sh")
    return a


def setting_text(name):
    extra, threads = SETTINGS[name]
    env = " ".join(f"{k}={v}" for k, v in extra.items()) or "no variable set"
    return f"torch.set_num_threads({threads}), {env}"


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV}
    env.update(extra)
    return env


class Runner:
    """Runs one measuring process at a time and keeps every trial."""

    def __init__(self, a, total):
        self.a, self.total, self.done, self.rows, self.results = a, total, 0, [], []
        self.start = time.monotonic()

    def run(self, phase, side, model, setting="", timeout=None):
        """One process; None when it ran past timeout seconds and was stopped."""
        a = self.a
        if side == "pytorch":
            extra, threads = SETTINGS[setting]
            cmd = [sys.executable, os.path.join(HERE, "pytorch_bench.py"), "--format", "json",
                   "--threads", str(threads), "--interop-threads", str(INTEROP_THREADS)]
            env = clean_env(extra)
        else:
            cmd = [a.bin_openblas if side == "openblas" else a.bin_purego, "bench", "--format", "json"]
            env = clean_env({"GOMAXPROCS": "2"})
        trials = a.probe_trials if phase == "probe" else a.trials
        cmd += ["--batch", str(a.batch), "--steps", str(a.steps), "--warmup", str(a.warmup), "--trials", str(trials)]
        cmd += [model] if side == "pytorch" else ["--model", model]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.done += 1
            print(f"[{self.done}/{self.total} {time.monotonic() - self.start:.0f}s] {model} {phase} {SIDE_NAMES[side]} "
                  f"{setting}: stopped after {timeout:.0f} s", file=sys.stderr, flush=True)
            return None
        if p.returncode != 0:
            sys.exit(f"compare: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stderr}")
        r = json.loads(p.stdout)[0]
        self.done += 1
        r.update(phase=phase, side=side, setting=setting, process=self.done, wall_seconds=time.monotonic() - t0)
        self.results.append(r)
        for i, t in enumerate(r["trial_seconds"]):
            self.rows.append(dict(model=model, phase=phase, side=side, setting=setting, process=self.done, trial=i + 1,
                                  batch=a.batch, warmup=a.warmup, steps=a.steps, trial_seconds=f"{t:.6g}",
                                  samples_per_second=f"{a.batch / t:.1f}", params=r["params"], env=r.get("env", "")))
        s = benchstats.summarize(r["trial_seconds"])
        print(f"[{self.done}/{self.total} {time.monotonic() - self.start:.0f}s] {model} {phase} {SIDE_NAMES[side]}"
              f"{' ' + setting if setting else ''}: median trial {s['median'] * 1e3:.2f} ms, "
              f"trials {min(r['trial_seconds']) * 1e3:.2f}..{max(r['trial_seconds']) * 1e3:.2f} ms", file=sys.stderr, flush=True)
        return r


def version_fields(line):
    """Splits `gradwire version` output: version, Go version, BLAS."""
    m = re.match(r"gradwire (\S+) \((\S+), blas (.+)\)", line.strip())
    return m.groups() if m else (line.strip(), "?", "?")


def user_args(argv):
    """argv without the binary paths that run.sh adds: the command as typed."""
    out, skip = [], False
    for x in argv:
        if skip:
            skip = False
        elif x in ("--bin-openblas", "--bin-purego"):
            skip = True
        elif not x.startswith(("--bin-openblas=", "--bin-purego=")):
            out.append(x)
    return out


def main(argv):
    a = parse_args(argv)
    if a.validate:
        return
    os.makedirs(a.out, exist_ok=True)
    per_model = len(a.settings) + 4 * a.processes
    run = Runner(a, per_model * len(a.models))
    chosen, summary, stopped = {}, {}, {}
    for m in a.models:
        probes, fastest = {}, None
        for s in a.settings:
            r = run.run("probe", "pytorch", m, s, timeout=fastest and PROBE_CAP * fastest)
            probes[s] = r
            if r is not None and (fastest is None or r["wall_seconds"] < fastest):
                fastest = r["wall_seconds"]
        chosen[m] = min((r for r in probes.values() if r), key=lambda r: r["median_seconds"])["setting"]
        stopped[m] = {s: PROBE_CAP * fastest for s, r in probes.items() if r is None}
        for _ in range(a.processes):
            for side in ("openblas", "pytorch", "purego", "pytorch"):
                run.run("compare", side, m, chosen[m] if side == "pytorch" else "")
        summary[m] = {}
        for side in ("pytorch", "openblas", "purego"):
            rs = [r for r in run.results if r["model"] == m and r["phase"] == "compare" and r["side"] == side]
            trials = [t for r in rs for t in r["trial_seconds"]]
            summary[m][side] = dict(benchstats.summarize(trials), params=rs[0]["params"], processes=len(rs),
                                    trials=len(trials), process_medians=[r["median_seconds"] for r in rs],
                                    blas_core=rs[0].get("blas_core", ""), torch=rs[0].get("torch", ""))
    elapsed = time.monotonic() - run.start
    write_csv(a, run.rows)
    write_md(a, argv, run.results, chosen, stopped, summary, elapsed)
    print(open(os.path.join(a.out, "results.md")).read())


def write_csv(a, rows):
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_md(a, argv, results, chosen, stopped, summary, elapsed):
    ob_version = subprocess.run([a.bin_openblas, "version"], capture_output=True, text=True, check=True).stdout
    pg_version = subprocess.run([a.bin_purego, "version"], capture_output=True, text=True, check=True).stdout
    version, go, blas = version_fields(ob_version)
    _, _, pg_blas = version_fields(pg_version)
    # gradwire's own description (CPU with family and model, memory, the vector
    # instructions its kernels use), else the CPU's model name.
    machine = next((r["machine"] for r in results if r.get("machine")), None)
    if machine is None:
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
        machine = f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.machine()}"
    torch_version = next(s["pytorch"]["torch"] for s in summary.values())
    now = datetime.datetime.now(datetime.timezone.utc)
    ms = lambda s: f"{s * 1e3:.2f}"
    L = ["# Training-step throughput, gradwire vs PyTorch, interleaved processes", ""]
    L.append(f"Command: `{' '.join(['experiments/bench/run.sh'] + user_args(argv))}`" + (" (quick smoke test: the figures mean nothing)" if a.quick else ""))
    L.append("")
    L.append(f"- Machine: {machine}; "
             f"date {now:%Y-%m-%d %H:%M} UTC; wall time {elapsed / 60:.1f} min.")
    L.append(f"- gradwire {version}, {go}, GOMAXPROCS=2; BLAS: {blas} (openblas build), {pg_blas} (pure-Go build).")
    L.append(f"- PyTorch {torch_version} (python {platform.python_version()}), thread setting per model from a first pass "
             f"(column side; settings below), inter-op threads {INTEROP_THREADS}.")
    L.append(f"- Per process one model: batch {a.batch}, {a.warmup} warm-up steps, then {a.trials} trials of {a.steps} timed "
             f"steps; a trial's figure is its median step. Per model, rounds of gradwire openblas, PyTorch, gradwire "
             f"pure Go, PyTorch: {a.processes} per gradwire build, {2 * a.processes} for PyTorch. "
             f"First pass: one PyTorch process per setting, trials: {a.probe_trials}, fastest median trial kept.")
    L.append("")
    L.append("| model | side | parameters | processes x trials | best step (ms) | median step (ms) | best samples/s | "
             "median samples/s | median / best | slowest / fastest | ratio of bests | ratio of medians |")
    L.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for m, sides in summary.items():
        pt = sides["pytorch"]
        for side in ("pytorch", "openblas", "purego"):
            s = sides[side]
            name = SIDE_NAMES[side] + (f" ({chosen[m]})" if side == "pytorch" else "")
            if side == "pytorch":
                rb = rm = "-"
            else:
                rb, rm = benchstats.ratio_cells(s, pt, a.max_spread, SIDE_NAMES[side])
            L.append(f"| {m} | {name} | {s['params']} | {s['processes']} x {s['trials'] // s['processes']} | {ms(s['best'])} | "
                     f"{ms(s['median'])} | {a.batch / s['best']:.1f} | {a.batch / s['median']:.1f} | "
                     f"{s['median_over_best']:.2f} | {s['spread']:.2f} | {rb} | {rm} |")
    L.append("")
    L.append("Ratios: gradwire samples/s over PyTorch samples/s for the same model (above 1: gradwire faster), of the best "
             "trials and of the median trials over all processes of a side. A side whose median trial is more than "
             f"{a.max_spread:g}x its best (--max-spread) gets no ratio; the cell names it. Step: forward, cross-entropy, "
             "backward and a plain SGD update on a fixed random batch.")
    L.append("")
    L.append("## PyTorch thread settings, first pass")
    L.append("")
    L.append(f"Median trial (ms) of one process per setting; * kept; stopped: the process ran {PROBE_CAP}x longer "
             "than the model's fastest first-pass process and was ended.")
    L.append("")
    L.append("| model | " + " | ".join(a.settings) + " |")
    L.append("|---|" + "--:|" * len(a.settings))
    for m in summary:
        cells = []
        for s in a.settings:
            if s in stopped[m]:
                cells.append(f"stopped ({stopped[m][s]:.0f} s)")
                continue
            r = next(r for r in results if r["model"] == m and r["phase"] == "probe" and r["setting"] == s)
            cells.append(ms(r["median_seconds"]) + (" *" if s == chosen[m] else ""))
        L.append(f"| {m} | " + " | ".join(cells) + " |")
    L.append("")
    for s in a.settings:
        L.append(f"- {s}: {setting_text(s)}.")
    L.append("")
    L.append("## Median trial per process (ms), in run order")
    L.append("")
    L.append("| model | side | processes |")
    L.append("|---|---|---|")
    for m, sides in summary.items():
        for side in ("pytorch", "openblas", "purego"):
            L.append(f"| {m} | {SIDE_NAMES[side]} | " + ", ".join(ms(t) for t in sides[side]["process_medians"]) + " |")
    L.append("")
    L.append("Every trial: results.csv (phase probe: first pass; compare: the comparison).")
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
