#!/usr/bin/python3
"""An independent PyTorch reference for the compression sweep's PowerSGD rows on
LeNet-5 / Fashion-MNIST: N logical workers in one process, each computing the
gradient of its own slice of every global batch, PowerSGD as PyTorch's
ddp_comm_hooks.powerSGD_hook computes it (error feedback, warm start, Q
orthonormalised before every P = M Q, a matrix compressed only when
(n+m)*r*2 < n*m, vanilla all-reduce before start_iter, the error of a dense
tensor e = M - mean(M)), the workers' mean, then torch.optim.SGD with the
sweep's schedule (linear warm-up from peak/W over W steps, then cosine).

It shares no code with gradwire; it exists to tell whether a behaviour of
gradwire's PowerSGD (such as rank 1 collapsing to chance in some seeds) belongs
to the algorithm and recipe or to the implementation.

  GRADWIRE_DATA=../shared/data /usr/bin/python3 experiments/reference/powersgd_lenet5.py --seed 1 --rank 1
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# The model is the speed comparison's LeNet-5 (the same layers as gradwire's).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from pytorch_bench import LeNet5  # noqa: E402


def idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    dims = b[3]
    shape = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(root, split):
    d = os.path.join(root, "fashion-mnist")
    x = idx(os.path.join(d, f"{split}-images-idx3-ubyte.gz")).astype(np.float32) / 255
    y = idx(os.path.join(d, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    x = (x - 0.2860) / 0.3530
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def orthonormalise(cols, eps):
    """Gram-Schmidt over the columns of cols (n x r), in place."""
    for i in range(cols.shape[1]):
        c = cols[:, i]
        for j in range(i):
            c -= (c @ cols[:, j]) * cols[:, j]
        c /= c.norm() + eps


class PowerSGD:
    def __init__(self, shapes, workers, rank, start, orient, seed):
        self.workers, self.rank, self.start = workers, rank, start
        self.gen = torch.Generator().manual_seed(seed)
        self.mats = []  # per tensor: (rows, cols, rank or 0 for dense, transpose)
        for s in shapes:
            t = orient == "in-out" and len(s) == 2  # view a Linear weight as in x out
            n = s[1] if t else s[0]
            m = int(np.prod(s)) // n
            r = min(rank, n, m)
            dense = len(s) < 2 or (n + m) * r * 2 >= n * m
            self.mats.append((n, m, 0 if dense else r, t))
        self.err = [[torch.zeros(n, m) for (n, m, _, _) in self.mats] for _ in range(workers)]
        self.q = [torch.randn(m, r, generator=self.gen) if r else None for (n, m, r, _) in self.mats]

    def view(self, g, i):
        n, m, _, t = self.mats[i]
        return (g.t() if t else g).reshape(n, m)

    def mean(self, grads, step):
        """grads[k][i]: worker k's gradient of tensor i. Returns the decoded mean."""
        out = []
        for i, (n, m, r, t) in enumerate(self.mats):
            ms = [self.view(grads[k][i], i) for k in range(self.workers)]
            if step < self.start:
                mean = sum(ms) / self.workers
            else:
                ms = [ms[k] + self.err[k][i] for k in range(self.workers)]
                if r == 0:
                    mean = sum(ms) / self.workers
                else:
                    q = self.q[i]
                    orthonormalise(q, 0.0)
                    p = sum(mk @ q for mk in ms)
                    orthonormalise(p, 0.0)
                    q = sum(mk.t() @ p for mk in ms) / self.workers
                    self.q[i] = q
                    mean = p @ q.t()
                for k in range(self.workers):
                    self.err[k][i] = ms[k] - mean
            shape = grads[0][i].shape
            out.append((mean.reshape(shape[1], shape[0]).t() if t else mean.reshape(shape)).contiguous())
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rank", type=int, default=1, help="0: no compression")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32, help="per worker")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--warmup-epochs", type=float, default=1)
    ap.add_argument("--start-iter", type=int, default=234)
    ap.add_argument("--orient", choices=["in-out", "out-in"], default="in-out",
                    help="view a Linear weight as in x out (gradwire's layout) or out x in (PyTorch's)")
    ap.add_argument("--log-every", type=int, default=50)
    a = ap.parse_args()
    root = os.environ.get("GRADWIRE_DATA")
    if not root:
        sys.exit("set GRADWIRE_DATA to the directory that holds fashion-mnist/")
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    xtr, ytr = load(root, "train")
    xte, yte = load(root, "t10k")
    model = LeNet5()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    gb = a.workers * a.batch
    per_epoch = len(xtr) // gb
    total = per_epoch * a.epochs
    warm = max(1, round(a.warmup_epochs * per_epoch))
    psgd = PowerSGD([p.shape for p in params], a.workers, a.rank, a.start_iter if a.rank else 1 << 62,
                    a.orient, a.seed)
    step, t0 = 0, time.time()
    for epoch in range(1, a.epochs + 1):
        perm = torch.randperm(len(xtr))
        losses = []
        for b in range(per_epoch):
            if step < warm:
                lr = a.lr / warm + (a.lr - a.lr / warm) * step / warm
            else:
                lr = a.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / (total - warm)))
            for gr in opt.param_groups:
                gr["lr"] = lr
            grads, loss = [], 0.0
            for k in range(a.workers):
                ix = perm[b * gb + k * a.batch:b * gb + (k + 1) * a.batch]
                model.zero_grad()
                lk = F.cross_entropy(model(xtr[ix]), ytr[ix])
                lk.backward()
                grads.append([p.grad.detach().clone() for p in params])
                loss += lk.item() / a.workers
            for p, g in zip(params, psgd.mean(grads, step)):
                p.grad = g
            opt.step()
            losses.append(loss)
            step += 1
            if step % a.log_every == 0:
                print(json.dumps({"kind": "step", "step": step, "loss": loss, "lr": lr}), flush=True)
        model.eval()
        with torch.no_grad():
            out = model(xte)
            tl = F.cross_entropy(out, yte).item()
            acc = (out.argmax(1) == yte).float().mean().item()
        model.train()
        print(json.dumps({"kind": "epoch", "epoch": epoch, "step": step, "train_loss": float(np.mean(losses)),
                          "test_loss": tl, "test_accuracy": acc, "seconds": time.time() - t0}), flush=True)


if __name__ == "__main__":
    main()
