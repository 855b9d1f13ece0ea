"""PyTorch reference for `gradwire bench`: the same five models, input shapes and
training step (forward, cross-entropy, backward, plain SGD update) on a fixed
random batch, timed the same way: --warmup untimed steps, then --trials timed
blocks of --steps steps; a trial's figure is its median step; reported are the
best trial, the median trial and the spread (slowest / fastest trial).

usage: python3 pytorch_bench.py [--batch 64] [--steps 10] [--warmup 20] [--trials 5]
           [--threads 2] [--interop-threads 1] [--format csv|json] [MODEL ...]

--threads sets torch.set_num_threads (intra-op: OpenMP loops, oneDNN, and the
OpenBLAS pool where PyTorch sets it), --interop-threads
torch.set_num_interop_threads; both before any work. Settings read by the
libraries when they load (OMP_WAIT_POLICY, GOMP_SPINCOUNT, KMP_BLOCKTIME,
OPENBLAS_NUM_THREADS, ...) must be in the environment of this process:
run.sh starts one process per setting. The ones set are echoed in the output
(column env).
Writes csv (one row per model, trial_seconds separated by ";") or json (a
list, field names as `gradwire bench --format json`) to stdout.
"""
import argparse
import csv
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the repository
import benchstats  # noqa: E402 (next to this file: python puts the script's folder on sys.path)

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.f1, self.f2, self.f3 = nn.Linear(784, 512), nn.Linear(512, 256), nn.Linear(256, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x)))))


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2).flatten(1)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x)))))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(h + (x if self.down is None else self.down(x)))


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.b = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for stage, cout in enumerate([16, 32, 64]):
            for i in range(3):
                blocks.append(Block(cin, cout, 2 if stage > 0 and i == 0 else 1))
                cin = cout
        self.blocks, self.fc = nn.Sequential(*blocks), nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(self.blocks(F.relu(self.b(self.c(x)))).mean((2, 3)))


class LSTMClassifier(nn.Module):
    """One LSTM layer over the 28 rows of a 28x28 image, last hidden state classified."""

    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(28, 128, batch_first=True), nn.Linear(128, 10)

    def forward(self, x):
        out, _ = self.lstm(x.view(x.shape[0], 28, 28))
        return self.fc(out[:, -1])


class CharLSTM(nn.Module):
    """Embedding 64, two LSTM layers of 128, next-character logits at every step."""

    def __init__(self, vocab=65):
        super().__init__()
        self.embed = nn.Embedding(vocab, 64)
        self.lstm = nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.out = nn.Linear(128, vocab)

    def forward(self, x):
        h, _ = self.lstm(self.embed(x))
        return self.out(h.reshape(-1, 128))


# model -> (module, input maker, labels per example, classes): the shapes of internal/bench.
MODELS = {
    "mlp": (MLP, lambda b: torch.randn(b, 1, 28, 28), 1, 10),
    "lenet5": (LeNet5, lambda b: torch.randn(b, 1, 28, 28), 1, 10),
    "resnet20": (ResNet20, lambda b: torch.randn(b, 3, 32, 32), 1, 10),
    "lstm": (LSTMClassifier, lambda b: torch.randn(b, 1, 28, 28), 1, 10),
    "charlstm": (CharLSTM, lambda b: torch.randint(0, 65, (b, 64)), 64, 65),
}


# Environment variables that change how PyTorch's thread pools behave, echoed
# with each result so that a row says which setting it was measured under.
THREAD_ENV = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "GOMP_SPINCOUNT", "KMP_BLOCKTIME",
              "KMP_AFFINITY", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def measure(name, batch, steps, warmup, trials):
    module, make_x, ylen, classes = MODELS[name]
    torch.manual_seed(1)
    m = module()
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    x, y = make_x(batch), torch.randint(0, classes, (batch * ylen,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    trial_seconds, min_step = [], float("inf")
    for _ in range(trials):
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        trial_seconds.append(benchstats.median(times))
        min_step = min(min_step, min(times))
    s = benchstats.summarize(trial_seconds)
    return {
        "model": name, "batch": batch, "params": sum(p.numel() for p in m.parameters()),
        "warmup": warmup, "steps": steps, "trials": trials, "trial_seconds": trial_seconds,
        "best_seconds": s["best"], "median_seconds": s["median"], "spread": s["spread"], "min_seconds": min_step,
        "best_samples_per_second": batch / s["best"], "samples_per_second": batch / s["median"],
        "torch": torch.__version__, "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
        "env": " ".join(f"{k}={os.environ[k]}" for k in THREAD_ENV if k in os.environ),
    }


CSV_COLUMNS = ("model", "batch", "params", "warmup", "steps", "trials", "best_seconds", "median_seconds", "spread",
               "best_samples_per_second", "samples_per_second", "torch", "threads", "interop_threads", "env", "trial_seconds")


def csv_cells(r):
    cell = {k: r[k] for k in CSV_COLUMNS}
    for k in ("best_seconds", "median_seconds"):
        cell[k] = f"{r[k]:.6g}"
    cell["spread"] = f"{r['spread']:.3f}"
    for k in ("best_samples_per_second", "samples_per_second"):
        cell[k] = f"{r[k]:.1f}"
    cell["trial_seconds"] = ";".join(f"{t:.6g}" for t in r["trial_seconds"])
    return [cell[k] for k in CSV_COLUMNS]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", default=list(MODELS))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=10, help="timed steps per trial")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps before the first trial")
    p.add_argument("--trials", type=int, default=5, help="timed blocks of --steps steps, in this process")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (intra-op)")
    p.add_argument("--interop-threads", type=int, default=1, help="torch.set_num_interop_threads")
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    a = p.parse_args()
    for m in a.models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}; expected one of {', '.join(MODELS)}")
    for k, lo in (("batch", 1), ("steps", 1), ("warmup", 0), ("trials", 1), ("threads", 1), ("interop_threads", 1)):
        if getattr(a, k) < lo:
            p.error(f"--{k.replace('_', '-')} {getattr(a, k)}: expected >= {lo}")
    # Inter-op first: it can only be set before any inter-op work has started.
    torch.set_num_interop_threads(a.interop_threads)
    torch.set_num_threads(a.threads)
    results, out = [], csv.writer(sys.stdout, lineterminator="\n")
    if a.format == "csv":
        out.writerow(CSV_COLUMNS)
    for m in a.models:
        r = measure(m, a.batch, a.steps, a.warmup, a.trials)
        results.append(r)
        if a.format == "csv":
            out.writerow(csv_cells(r))
            sys.stdout.flush()
        print(f"pytorch: {m} done", file=sys.stderr)
    if a.format == "json":
        json.dump(results, sys.stdout, indent=2)
        print()


if __name__ == "__main__":
    main()
