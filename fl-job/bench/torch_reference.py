"""PyTorch CPU reference for fl-job's models, for side-by-side throughput runs against
`fl-job bench` (same architectures, batch 20, SGD with momentum 0.9, cross-entropy,
BatchNorm in training mode, same thread count).

- ResNet-18 as in fl-task/src/model/resnet.rs: 1x28x28 input, 3x3 stride-1 stem, no
  max-pool, 4 stages x 2 basic blocks at widths w, 2w, 4w, 8w (strides 1, 2, 2, 2),
  global average pool, linear to 62 classes (11,199,486 parameters at w = 64).
- MobileNet-V2 as in fl-task/src/model/mobilenet.rs: 3x3 stride-1 stem, the standard
  inverted-residual table (t, c, n, s) with widths rounded to multiples of 8, ReLU6,
  1x1 head to 1280 * max(1, width), linear to 62 (2,302,718 parameters at 1.0).

Extended from ../shared/bench/torch_reference.py (ResNet-18 only). Install torch once:
    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch numpy
Run, alternating with `fl-job bench` on an idle machine:
    /tmp/torchenv/bin/python fl-job/bench/torch_reference.py --threads 2 resnet18:64 mobilenet_v2:0.5
It prints one JSON object per model: {"model", "params", "train", "infer", "torch", "threads"}.
"""
import argparse, json, time
import torch, torch.nn as nn, torch.nn.functional as F


class ConvBn(nn.Module):
    def __init__(s, cin, cout, k, stride, act, groups=1):
        super().__init__()
        s.c = nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)
        s.b = nn.BatchNorm2d(cout)
        s.act = act

    def forward(s, x):
        x = s.b(s.c(x))
        if s.act == "relu":
            return F.relu(x)
        if s.act == "relu6":
            return F.relu6(x)
        return x


class Block(nn.Module):
    def __init__(s, cin, cout, stride):
        super().__init__()
        s.c1 = ConvBn(cin, cout, 3, stride, "relu")
        s.c2 = ConvBn(cout, cout, 3, 1, None)
        s.sc = ConvBn(cin, cout, 1, stride, None) if (stride != 1 or cin != cout) else None

    def forward(s, x):
        return F.relu(s.c2(s.c1(x)) + (s.sc(x) if s.sc else x))


class ResNet18(nn.Module):
    def __init__(s, w, classes=62):
        super().__init__()
        s.stem = ConvBn(1, w, 3, 1, "relu")
        blocks, cin = [], w
        for st, stride in enumerate([1, 2, 2, 2]):
            cout = w << st
            blocks += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        s.blocks = nn.Sequential(*blocks)
        s.fc = nn.Linear(cin, classes)

    def forward(s, x):
        x = s.blocks(s.stem(x))
        return s.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def scaled(c, width):
    v = c * width
    r = max(int((v + 4.0) // 8.0) * 8, 8)
    if r < 0.9 * v:
        r += 8
    return r


class InvertedResidual(nn.Module):
    def __init__(s, cin, cout, stride, t):
        super().__init__()
        hidden = cin * t
        s.expand = ConvBn(cin, hidden, 1, 1, "relu6") if t != 1 else None
        s.dw = ConvBn(hidden, hidden, 3, stride, "relu6", groups=hidden)
        s.project = ConvBn(hidden, cout, 1, 1, None)
        s.residual = stride == 1 and cin == cout

    def forward(s, x):
        h = s.expand(x) if s.expand else x
        y = s.project(s.dw(h))
        return x + y if s.residual else y


class MobileNetV2(nn.Module):
    def __init__(s, width, classes=62):
        super().__init__()
        cin = scaled(32, width)
        s.stem = ConvBn(1, cin, 3, 1, "relu6")
        blocks = []
        for t, c, n, st in STAGES:
            cout = scaled(c, width)
            for i in range(n):
                blocks.append(InvertedResidual(cin, cout, st if i == 0 else 1, t))
                cin = cout
        s.blocks = nn.Sequential(*blocks)
        last = scaled(1280, max(width, 1.0))
        s.head = ConvBn(cin, last, 1, 1, "relu6")
        s.fc = nn.Linear(last, classes)

    def forward(s, x):
        x = s.head(s.blocks(s.stem(x)))
        return s.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def build(spec):
    kind, w = spec.split(":")
    if kind == "resnet18":
        return ResNet18(int(w))
    if kind == "mobilenet_v2":
        return MobileNetV2(float(w))
    raise SystemExit(f"unknown model {spec!r} (resnet18:W or mobilenet_v2:W)")


def rate(model, batch, secs, train):
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 62, (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step():
        if train:
            model.train()
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        else:
            model.eval()
            with torch.no_grad():
                model(x)

    for _ in range(2):
        step()
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < secs:
        step()
        n += 1
    return n * batch / (time.perf_counter() - t)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=["resnet18:64", "resnet18:16", "mobilenet_v2:1.0", "mobilenet_v2:0.5"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--seconds", type=float, default=8.0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for spec in a.models:
        m = build(spec)
        params = sum(q.numel() for q in m.parameters() if q.requires_grad)
        row = {
            "model": spec,
            "params": params,
            "train": round(rate(m, a.batch, a.seconds, True), 1),
            "infer": round(rate(m, a.batch, a.seconds, False), 1),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }
        print(json.dumps(row), flush=True)
