#!/usr/bin/env python3
"""PyTorch replay of an `fl-job fedavg` run: the same FEMNIST writers, model, hyper-parameters,
local batch order and evaluation set, implemented independently in plain PyTorch.

It reads the run's fedavg.json (participants per round, their local seeds, the evaluation set,
the settings) and the FEMNIST LEAF files the run read, then trains FedAvg round by round:

- model: the ResNet-18 / MobileNet-V2 of fl-task/src/model/{resnet,mobilenet}.rs layer for layer
  (bias-free convolutions, BatchNorm eps 1e-5 and momentum 0.1, ReLU / ReLU6), initialised
  as ours by rule (ResNet-18: PyTorch's defaults, the same Kaiming-uniform bounds Burn's
  defaults use; MobileNet-V2: torchvision's) seeded by the run's seed, or with `--init ours`
  the run's own initial weights (init.f32 / init.json);
- local training: a fresh torch.optim.SGD per participant and round (momentum without
  dampening, as ours), cross-entropy, mini-batches in the order `datasets` draws them
  (xoshiro256** seeded by SplitMix64, Fisher-Yates, Lemire's bounded draw; re-implemented
  below and checked against the order the run recorded), the last batch smaller;
- FedAvg: the sample-weighted mean (in float64) of every float tensor of the state dict,
  BatchNorm running mean and variance included, as fl-job's FlTask::aggregate;
- with `bn_calibration` > 0: after every aggregation the running statistics are re-estimated
  on the run's calibration set (held-out samples after the evaluation set in its draw), in
  batches of 100 in order, as the sample-weighted mean of each batch's statistics (as
  fl_task::recalibrate_bn; the variance unbiased here, biased there);
- evaluation: eval mode (BatchNorm running statistics), batches of the run's eval_batch.

Known difference: PyTorch updates BatchNorm's running variance with the unbiased batch
variance, Burn with the biased one (a factor n/(n-1), n = batch x height x width >= 16 here).

Usage (the torch venv of fl-job/TRAINING.md):
    /tmp/torchenv/bin/python fl-job/bench/fedavg_torch.py results/fedavg/fedavg.json \
        --out results/fedavg/torch.json [--init torch|ours] [--threads 2]
"""

import argparse
import glob
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MASK64 = (1 << 64) - 1
NUM_CLASSES = 62


# ---------------------------------------------------------------- venn_core::rng, in Python
def _splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK64


class SeededRng:
    """xoshiro256** seeded by SplitMix64, as venn_core::rng::SeededRng."""

    def __init__(self, seed):
        st = seed & MASK64
        self.s = []
        for _ in range(4):
            st, v = _splitmix64(st)
            self.s.append(v)

    def next_u64(self):
        s = self.s
        result = (_rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, n):
        return (self.next_u64() * n) >> 64

    def shuffle(self, items):
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


def shuffled_indices(n, seed):
    idx = list(range(n))
    SeededRng(seed).shuffle(idx)
    return idx


# ---------------------------------------------------------------- FEMNIST (LEAF files)
def load_leaf(directory, wanted):
    """{writer: (uint8 pixels [n, 784] as `datasets` stores them, labels [n])} for the writers
    in `wanted`, from every *.json / *.json.gz under `directory`."""
    files = sorted(
        glob.glob(os.path.join(directory, "**", "*.json"), recursive=True)
        + glob.glob(os.path.join(directory, "**", "*.json.gz"), recursive=True)
    )
    if not files:
        sys.exit(f"fedavg_torch: no LEAF files under {directory}")
    out = {}
    for f in files:
        opener = gzip.open if f.endswith(".gz") else open
        with opener(f, "rt") as fh:
            raw = json.load(fh)
        for user in raw["users"]:
            if user in wanted:
                d = raw["user_data"][user]
                x = np.rint(np.asarray(d["x"], dtype=np.float64) * 255.0).astype(np.uint8)
                out[user] = (x.reshape(-1, 784), np.asarray(d["y"], dtype=np.int64))
    missing = set(wanted) - set(out)
    if missing:
        sys.exit(f"fedavg_torch: writers not found under {directory}: {sorted(missing)[:5]}")
    return out


def model_pixels(raw):
    """`datasets::model_pixel`: 1 - k/255 (background 0, ink 1), as [n, 1, 28, 28]."""
    return torch.from_numpy((255 - raw.astype(np.float32)) / 255.0).reshape(-1, 1, 28, 28)


# ---------------------------------------------------------------- models (fl-job/src/model)
class ConvBn(nn.Module):
    """layers.rs ConvBn: bias-free conv with 'same' padding, BatchNorm, activation."""

    def __init__(self, cin, cout, kernel, stride, groups, act):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.act = act

    def forward(self, x):
        x = self.bn(self.conv(x))
        if self.act == "relu":
            return F.relu(x)
        if self.act == "relu6":
            return F.relu6(x)
        return x


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = ConvBn(cin, cout, 3, stride, 1, "relu")
        self.conv2 = ConvBn(cout, cout, 3, 1, 1, None)
        self.shortcut = ConvBn(cin, cout, 1, stride, 1, None) if stride != 1 or cin != cout else None

    def forward(self, x):
        skip = self.shortcut(x) if self.shortcut is not None else x
        return F.relu(self.conv2(self.conv1(x)) + skip)


class ResNet(nn.Module):
    """resnet.rs: 3x3 stride-1 stem, no max-pool, 4 stages x 2 blocks (w, 2w, 4w, 8w)."""

    def __init__(self, base):
        super().__init__()
        self.stem = ConvBn(1, base, 3, 1, 1, "relu")
        blocks, cin = [], base
        for stage, stride in enumerate([1, 2, 2, 2]):
            cout = base << stage
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.ModuleList(blocks)
        self.fc = nn.Linear(cin, NUM_CLASSES)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def scaled(c, width):
    """mobilenet.rs `scaled`: nearest multiple of 8, >= 8, not 10 % under c x width."""
    v = c * width
    r = max(int((v + 4.0) // 8.0) * 8, 8)
    if r < 0.9 * v:
        r += 8
    return r


MOBILENET_STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, t):
        super().__init__()
        hidden = cin * t
        self.expand = ConvBn(cin, hidden, 1, 1, 1, "relu6") if t != 1 else None
        self.depthwise = ConvBn(hidden, hidden, 3, stride, hidden, "relu6")
        self.project = ConvBn(hidden, cout, 1, 1, 1, None)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        h = self.expand(x) if self.expand is not None else x
        y = self.project(self.depthwise(h))
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """mobilenet.rs: stride-1 stem, the paper's stage table, 1x1 head, linear classifier."""

    def __init__(self, width):
        super().__init__()
        cin = scaled(32, width)
        self.stem = ConvBn(1, cin, 3, 1, 1, "relu6")
        blocks = []
        for t, c, n, s in MOBILENET_STAGES:
            cout = scaled(c, width)
            for i in range(n):
                blocks.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        self.blocks = nn.ModuleList(blocks)
        last = scaled(1280, max(width, 1.0))
        self.head = ConvBn(cin, last, 1, 1, 1, "relu6")
        self.classifier = nn.Linear(last, NUM_CLASSES)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
        x = self.head(x)
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def torchvision_init(model):
    """mobilenet.rs's initialisation, torchvision's for MobileNet-V2: convolutions
    Kaiming-normal over the fan-out (c_out x k x k, groups not divided out), the classifier
    N(0, 0.01) with a zero bias; BatchNorm weight 1, bias 0 (PyTorch's default)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)
    return model


def build_model(spec):
    """The run's `model` field: {"model": "resnet18", "base_width": 4} or mobilenet_v2/width,
    initialised as ours is (PyTorch's defaults for ResNet-18, torchvision's for MobileNet-V2)."""
    if spec["model"] == "resnet18":
        return ResNet(int(spec["base_width"]))
    if spec["model"] == "mobilenet_v2":
        return torchvision_init(MobileNetV2(float(spec["width"])))
    sys.exit(f"fedavg_torch: unknown model {spec}")


def load_our_init(model, run_dir, blob_name="init.f32"):
    """Copies the run's initial weights (init.json + init.f32, Burn paths) into `model`; with
    `blob_name` another blob in init.f32's layout (round-N.f32 of `fl-job fedavg --save-rounds`)."""
    with open(os.path.join(run_dir, "init.json")) as f:
        index = json.load(f)
    blob = np.fromfile(os.path.join(run_dir, blob_name), dtype="<f4")
    state = model.state_dict()
    seen = set()
    rename = {"gamma": "weight", "beta": "bias"}
    for t in index:
        parts = t["path"].split(".")[1:]  # drop the Model enum variant
        parts[-1] = rename.get(parts[-1], parts[-1])
        name = ".".join(parts)
        if name not in state:
            sys.exit(f"fedavg_torch: init tensor {t['path']} has no counterpart ({name})")
        n = int(np.prod(t["shape"]))
        value = torch.from_numpy(blob[t["offset"]:t["offset"] + n].copy()).reshape(t["shape"])
        if name.endswith(("fc.weight", "classifier.weight")):
            value = value.t()  # Burn's Linear stores [in, out]
        if tuple(value.shape) != tuple(state[name].shape):
            sys.exit(f"fedavg_torch: {name}: shape {tuple(value.shape)} vs {tuple(state[name].shape)}")
        state[name] = value
        seen.add(name)
    left = [k for k, v in state.items() if v.is_floating_point() and k not in seen]
    if left:
        sys.exit(f"fedavg_torch: the run's init lacks {left[:5]}")
    model.load_state_dict(state)


# ---------------------------------------------------------------- FedAvg
def train_local(model, images, labels, seed, cfg):
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"],
                          dampening=0.0, weight_decay=cfg["weight_decay"])
    n, bs = len(labels), cfg["batch_size"]
    max_steps = cfg.get("max_steps")
    epochs = cfg["local_epochs"]
    if max_steps is not None:
        epochs = max(epochs, 1, -(-max_steps // max(1, -(-n // bs))))
    steps, samples, loss_sum = 0, 0, 0.0
    for epoch in range(epochs):
        order = torch.tensor(shuffled_indices(n, (seed + epoch) & MASK64))
        for b in range(0, n, bs):
            if max_steps is not None and steps >= max_steps:
                break
            idx = order[b:b + bs]
            loss = F.cross_entropy(model(images[idx]), labels[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
            samples += len(idx)
            loss_sum += loss.item() * len(idx)
    return loss_sum / max(1, samples)


def fedavg(states, weights):
    total = float(sum(weights))
    out = {}
    for k, v in states[0].items():
        if not v.is_floating_point():
            out[k] = v  # num_batches_tracked: unused with a fixed BatchNorm momentum
            continue
        acc = torch.zeros_like(v, dtype=torch.float64)
        for s, n in zip(states, weights):
            acc += (n / total) * s[k].double()
        out[k] = acc.float()
    return out


@torch.no_grad()
def evaluate(model, images, labels, batch):
    model.eval()
    correct, loss_sum = 0, 0.0
    for b in range(0, len(labels), batch):
        logits = model(images[b:b + batch])
        loss_sum += F.cross_entropy(logits, labels[b:b + batch], reduction="sum").item()
        correct += (logits.argmax(1) == labels[b:b + batch]).sum().item()
    return correct / len(labels), loss_sum / len(labels)


@torch.no_grad()
def recalibrate_bn(model, images, batch=100):
    """The running statistics of every BatchNorm replaced by the sample-weighted mean of the
    statistics of `images` in batches of `batch`, in order (fl_task::recalibrate_bn)."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    kept = [m.momentum for m in bns]
    model.train()
    seen = 0
    for b in range(0, len(images), batch):
        x = images[b:b + batch]
        seen += len(x)
        for m in bns:
            m.momentum = len(x) / seen
        model(x)
    for m, k in zip(bns, kept):
        m.momentum = k
    model.eval()


def evaluate_batch_stats(model, images, labels, batch):
    """As `evaluate`, but BatchNorm normalises with each evaluation batch's own statistics
    instead of the running ones (train mode, no gradients; the running statistics it updates
    are reloaded before the next use). A diagnostic: where this holds up while `evaluate`
    falls, the weights are fine and the running statistics do not fit them."""
    model.train()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for b in range(0, len(labels), batch):
            logits = model(images[b:b + batch])
            loss_sum += F.cross_entropy(logits, labels[b:b + batch], reduction="sum").item()
            correct += (logits.argmax(1) == labels[b:b + batch]).sum().item()
    model.eval()
    return correct / len(labels), loss_sum / len(labels)


def replay(run_path, init="torch", threads=None, data_dir=None, log=print):
    """Replays the run at `run_path` (fedavg.json); returns the report dict."""
    if threads:
        torch.set_num_threads(threads)
    with open(run_path) as f:
        run = json.load(f)
    if run.get("schema") != 1:
        sys.exit(f"fedavg_torch: {run_path}: schema {run.get('schema')}, expected 1")
    cfg = run["config"]
    data_dir = data_dir or run["data"]
    start = time.time()
    train_ids = {p["writer"] for r in run["rounds"] for p in r["participants"]}
    calibration_set = run.get("calibration_set", []) if cfg.get("bn_calibration", 0) else []
    test_ids = {w for w, _ in run["eval_set"]} | {w for w, _ in calibration_set}
    train = load_leaf(os.path.join(data_dir, "train"), train_ids)
    test = load_leaf(os.path.join(data_dir, "test"), test_ids)
    load_s = time.time() - start

    first = run["rounds"][1]["participants"][0]
    got = shuffled_indices(len(train[first["writer"]][1]), first["seed"])
    if got != run["first_shuffle"]:
        sys.exit("fedavg_torch: the re-implemented shuffle differs from the run's first_shuffle")

    eval_x = model_pixels(np.stack([test[w][0][i] for w, i in run["eval_set"]]))
    eval_y = torch.tensor([int(test[w][1][i]) for w, i in run["eval_set"]])
    tensors = {w: (model_pixels(x), torch.from_numpy(y)) for w, (x, y) in train.items()}
    calib_x = (model_pixels(np.stack([test[w][0][i] for w, i in calibration_set]))
               if calibration_set else None)

    torch.manual_seed(cfg["seed"])
    model = build_model(cfg["model"])
    if init == "ours":
        load_our_init(model, os.path.dirname(os.path.abspath(run_path)))
    t0 = time.time()
    acc, loss = evaluate(model, eval_x, eval_y, (cfg["eval_batch"] or 200))
    rounds = [{"round": 0, "accuracy": acc, "loss": loss, "train_loss": None,
               "wall_s": time.time() - t0}]
    log(f"torch round 0: accuracy {acc:.4f} loss {loss:.4f}")
    for r in run["rounds"][1:]:
        global_state = {k: v.clone() for k, v in model.state_dict().items()}
        states, weights, losses = [], [], []
        # fl-job's `lr_decay`: round r (1-based here, 0-based at the manager) trains at
        # lr × lr_decay^(r − 1).
        tcfg = dict(cfg["train"])
        tcfg["lr"] = cfg["train"]["lr"] * cfg["train"].get("lr_decay", 1.0) ** (r["round"] - 1)
        for p in r["participants"]:
            model.load_state_dict(global_state)
            x, y = tensors[p["writer"]]
            if len(y) != p["samples"]:
                sys.exit(f"fedavg_torch: writer {p['writer']} has {len(y)} train samples, "
                         f"the run says {p['samples']}")
            losses.append(train_local(model, x, y, p["seed"], tcfg))
            states.append({k: v.clone() for k, v in model.state_dict().items()})
            weights.append(len(y))
        model.load_state_dict(fedavg(states, weights))
        if calib_x is not None:
            recalibrate_bn(model, calib_x)
        acc, loss = evaluate(model, eval_x, eval_y, (cfg["eval_batch"] or 200))
        train_loss = sum(l * n for l, n in zip(losses, weights)) / sum(weights)
        rounds.append({"round": r["round"], "accuracy": acc, "loss": loss,
                       "train_loss": train_loss, "wall_s": time.time() - t0})
        log(f"torch round {r['round']}: accuracy {acc:.4f} loss {loss:.4f} "
            f"train_loss {train_loss:.4f} ({time.time() - t0:.1f} s)")
    return {
        "schema": 1,
        "replay_of": os.path.abspath(run_path),
        "init": init,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "data": data_dir,
        "load_s": load_s,
        "wall_s": time.time() - t0,
        "rounds": rounds,
    }


def score_rounds(run_path, threads=None, data_dir=None, log=print):
    """Scores our own global weights of every round (round-N.f32, written by `fl-job fedavg
    --save-rounds`) with PyTorch's evaluation: the same weights and running statistics, the
    same evaluation set. Where our accuracy and PyTorch's on the same weights differ, our
    evaluation path is wrong; where they agree, the weights themselves are what they are."""
    if threads:
        torch.set_num_threads(threads)
    with open(run_path) as f:
        run = json.load(f)
    cfg = run["config"]
    data_dir = data_dir or run["data"]
    run_dir = os.path.dirname(os.path.abspath(run_path))
    test = load_leaf(os.path.join(data_dir, "test"), {w for w, _ in run["eval_set"]})
    eval_x = model_pixels(np.stack([test[w][0][i] for w, i in run["eval_set"]]))
    eval_y = torch.tensor([int(test[w][1][i]) for w, i in run["eval_set"]])
    model = build_model(cfg["model"])
    rows = []
    for r in run["rounds"]:
        name = f"round-{r['round']}.f32"
        if not os.path.exists(os.path.join(run_dir, name)):
            continue
        load_our_init(model, run_dir, name)
        with torch.no_grad():
            acc, loss = evaluate(model, eval_x, eval_y, (cfg["eval_batch"] or 200))
        bacc, bloss = evaluate_batch_stats(model, eval_x, eval_y, (cfg["eval_batch"] or 200))
        rows.append({"round": r["round"], "ours": r["accuracy"], "ours_loss": r["loss"],
                     "torch_eval": acc, "torch_eval_loss": loss,
                     "batch_stats": bacc, "batch_stats_loss": bloss})
        log(f"round {r['round']:3}: ours {r['accuracy'] * 100:6.2f} % loss {r['loss']:.4f} | "
            f"PyTorch on our weights {acc * 100:6.2f} % loss {loss:.4f} | "
            f"with batch statistics {bacc * 100:6.2f} % loss {bloss:.4f}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="fedavg.json written by `fl-job fedavg`")
    ap.add_argument("--out", help="write the replay's JSON here (default: beside the run, torch.json)")
    ap.add_argument("--init", choices=["torch", "ours"], default="torch",
                    help="PyTorch's own seeded initialisation, or the run's initial weights")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--data", help="FEMNIST directory (default: the one the run read)")
    ap.add_argument("--score-rounds", action="store_true",
                    help="replay nothing: score the run's round-N.f32 (fl-job fedavg --save-rounds) "
                    "with PyTorch's evaluation, beside the run's own accuracy")
    a = ap.parse_args()
    if a.score_rounds:
        rows = score_rounds(a.run, a.threads, a.data)
        out = a.out or os.path.join(os.path.dirname(os.path.abspath(a.run)), "torch-scored.json")
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
        return
    report = replay(a.run, a.init, a.threads, a.data)
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(a.run)), "torch.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"final accuracy {report['rounds'][-1]['accuracy'] * 100:.2f} % in {report['wall_s']:.1f} s; {out}")


if __name__ == "__main__":
    main()
