"""PyTorch reference for `gradwire bench`: the same five models, input shapes and
training step (forward, cross-entropy, backward, plain SGD update) on a fixed
random batch, timed the same way (median over timed steps after warm-up).

usage: python3 pytorch_bench.py [--batch 64] [--steps 20] [--warmup 3] [--threads 2] [MODEL ...]
Writes CSV to stdout: model,batch,params,steps,median_seconds,samples_per_second.
"""
import argparse
import statistics
import sys
import time

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


def measure(name, batch, steps, warmup):
    module, make_x, ylen, classes = MODELS[name]
    torch.manual_seed(1)
    m = module()
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    x, y = make_x(batch), torch.randint(0, classes, (batch * ylen,))
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x), y).backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    params = sum(p.numel() for p in m.parameters())
    return [name, batch, params, steps, f"{med:.6g}", f"{batch / med:.1f}"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", default=list(MODELS))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    for m in a.models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}; expected one of {', '.join(MODELS)}")
    torch.set_num_threads(a.threads)
    print("model,batch,params,steps,median_seconds,samples_per_second")
    for m in a.models:
        print(",".join(str(v) for v in measure(m, a.batch, a.steps, a.warmup)), flush=True)
        print(f"pytorch: {m} done", file=sys.stderr)


if __name__ == "__main__":
    main()
