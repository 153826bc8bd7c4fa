#!/usr/bin/env python3
"""Does our FedAvg match a PyTorch FedAvg? Runs `fl-job fedavg` and its PyTorch replay
(fedavg_torch.py: same writers per round, model, hyper-parameters, batch order and evaluation
set) for several seeds, then compares the mean accuracy over seeds round by round and checks
the gap at the checkpoint rounds against a tolerance (3 points by default).

An optional tool, not run in CI (it needs PyTorch and several minutes). See fl-job/TRAINING.md,
"FedAvg against PyTorch". Typical use, from the repository root:

    cargo build --release -p fl-job
    /tmp/torchenv/bin/python fl-job/bench/fedavg_check.py

It writes fl-job/bench/fedavg-check-<date>.{md,json} (the table and every round of every run)
and keeps each run's files under --work (default results/fedavg-check). Exit status 1 when a
checkpoint is out of tolerance.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fedavg_torch  # noqa: E402


def run_ours(a, seed, out_dir):
    cmd = [a.fl_job, "fedavg", "--model", a.model, "--rounds", str(a.rounds),
           "--participants", str(a.participants), "--lr", str(a.lr), "--momentum", str(a.momentum),
           "--batch", str(a.batch), "--local-epochs", str(a.local_epochs), "--seed", str(seed),
           "--eval-samples", str(a.eval_samples), "--out", out_dir]
    if a.data:
        cmd += ["--data", a.data]
    env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads), RUST_LOG="warn")
    print("$", " ".join(cmd), flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True, env=env)
    with open(os.path.join(out_dir, "fedavg.json")) as f:
        run = json.load(f)
    return run, time.time() - t0


def mean(xs):
    return statistics.fmean(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fl-job", default="target/release/fl-job", help="the fl-job binary")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--model", default="resnet18:4")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--participants", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--local-epochs", type=int, default=1)
    ap.add_argument("--eval-samples", type=int, default=2000)
    ap.add_argument("--checkpoints", type=int, nargs="+", default=[5, 10, 20])
    ap.add_argument("--tolerance", type=float, default=3.0, help="percentage points")
    ap.add_argument("--init", choices=["torch", "ours"], default="torch",
                    help="PyTorch side starts from its own seeded init or from the run's weights")
    ap.add_argument("--threads", type=int, default=1, help="threads for each side, run one after the other "
                    "(1: on shared cores PyTorch's OpenMP threads spin against each other, 8x slower at 2)")
    ap.add_argument("--data", help="FEMNIST directory (default: fl-job's lookup order)")
    ap.add_argument("--work", default="results/fedavg-check", help="per-run files")
    ap.add_argument("--report", help="report path without extension "
                    "(default fl-job/bench/fedavg-check-<date>)")
    a = ap.parse_args()
    if max(a.checkpoints) > a.rounds:
        sys.exit(f"fedavg_check: checkpoint {max(a.checkpoints)} is past --rounds {a.rounds}")
    date = datetime.date.today().isoformat()
    report = a.report or os.path.join(HERE, f"fedavg-check-{date}")

    runs = []
    for seed in a.seeds:
        out_dir = os.path.join(a.work, f"seed{seed}")
        ours, ours_s = run_ours(a, seed, out_dir)
        print(f"ours  seed {seed}: {ours['rounds'][-1]['accuracy'] * 100:.2f} % "
              f"after {a.rounds} rounds, {ours_s:.1f} s", flush=True)
        theirs = fedavg_torch.replay(os.path.join(out_dir, "fedavg.json"), a.init, a.threads,
                                     a.data, log=lambda m: print(m, flush=True))
        with open(os.path.join(out_dir, f"torch-{a.init}.json"), "w") as f:
            json.dump(theirs, f, indent=1)
        print(f"torch seed {seed}: {theirs['rounds'][-1]['accuracy'] * 100:.2f} %, "
              f"{theirs['wall_s']:.1f} s (+{theirs['load_s']:.1f} s loading)", flush=True)
        runs.append({
            "seed": seed,
            "ours": {"wall_s": ours_s, "train_eval_s": ours["wall_s"],
                     "accuracy": [r["accuracy"] for r in ours["rounds"]],
                     "loss": [r["loss"] for r in ours["rounds"]],
                     "train_loss": [r["train_loss"] for r in ours["rounds"]],
                     "participants": [[p["writer"] for p in r["participants"]]
                                      for r in ours["rounds"][1:]]},
            "torch": {"wall_s": theirs["wall_s"], "load_s": theirs["load_s"],
                      "accuracy": [r["accuracy"] for r in theirs["rounds"]],
                      "loss": [r["loss"] for r in theirs["rounds"]],
                      "train_loss": [r["train_loss"] for r in theirs["rounds"]]},
        })

    rounds = list(range(a.rounds + 1))
    mean_ours = [mean([r["ours"]["accuracy"][k] for r in runs]) * 100 for k in rounds]
    mean_torch = [mean([r["torch"]["accuracy"][k] for r in runs]) * 100 for k in rounds]
    checks = []
    for k in a.checkpoints:
        diff = mean_ours[k] - mean_torch[k]
        checks.append({"round": k, "ours": mean_ours[k], "torch": mean_torch[k], "diff": diff,
                       "pass": abs(diff) <= a.tolerance})
    passed = all(c["pass"] for c in checks)

    with open(os.path.join(a.work, "seed%d" % a.seeds[0], "fedavg.json")) as f:
        first = json.load(f)
    setup = {
        "date": date, "model": a.model, "rounds": a.rounds, "participants": a.participants,
        "lr": a.lr, "momentum": a.momentum, "batch": a.batch, "local_epochs": a.local_epochs,
        "seeds": a.seeds, "eval_samples": len(first["eval_set"]),
        "eval_seed": first["config"]["eval_seed"], "data": first["data"],
        "train_writers": first["train_writers"], "torch_init": a.init, "threads": a.threads,
        "torch": fedavg_torch.torch.__version__, "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(), "tolerance_points": a.tolerance,
    }
    out = {"schema": 1, "setup": setup, "checks": checks, "pass": passed,
           "mean_accuracy": {"ours": mean_ours, "torch": mean_torch}, "runs": runs}
    with open(report + ".json", "w") as f:
        json.dump(out, f, indent=1)

    def wall(side):
        return ", ".join(f"{r[side]['wall_s']:.0f}" for r in runs)

    lines = [
        f"# FedAvg against PyTorch, {date}",
        "",
        f"`fl-job/bench/fedavg_check.py --init {a.init} --threads {a.threads}`: {a.model}, "
        f"{a.rounds} rounds, {a.participants} participants per round, lr {a.lr}, momentum "
        f"{a.momentum}, batch {a.batch}, {a.local_epochs} local epoch(s); seeds {a.seeds}; "
        f"accuracy on {setup['eval_samples']} held-out test samples (the same for every run); "
        f"PyTorch {setup['torch']} starting from "
        + ("its own seeded initialisation" if a.init == "torch" else "our initial weights")
        + f". Data: {setup['data']} ({setup['train_writers']} train writers).",
        "",
        f"Mean accuracy over {len(a.seeds)} seeds at the checkpoints (tolerance "
        f"{a.tolerance} points): **{'PASS' if passed else 'FAIL'}**",
        "",
        "| round | ours % | PyTorch % | ours − PyTorch | verdict |",
        "|---|---|---|---|---|",
    ]
    for c in checks:
        lines.append(f"| {c['round']} | {c['ours']:.2f} | {c['torch']:.2f} | {c['diff']:+.2f} | "
                     f"{'PASS' if c['pass'] else 'FAIL'} |")
    lines += ["", "Every round (mean over seeds; per seed: ours / PyTorch):", "",
              "| round | ours % | PyTorch % | diff | " + " | ".join(f"seed {s}" for s in a.seeds) + " |",
              "|---" * (4 + len(a.seeds)) + "|"]
    for k in rounds:
        per = " | ".join(f"{r['ours']['accuracy'][k] * 100:.1f} / {r['torch']['accuracy'][k] * 100:.1f}"
                         for r in runs)
        lines.append(f"| {k} | {mean_ours[k]:.2f} | {mean_torch[k]:.2f} | "
                     f"{mean_ours[k] - mean_torch[k]:+.2f} | {per} |")
    lines += ["", f"Wall time per seed (s, {a.threads} threads each, run one after the other): "
              f"ours {wall('ours')} (incl. loading the data); PyTorch {wall('torch')} "
              f"(plus {mean([r['torch']['load_s'] for r in runs]):.0f} s loading JSON per seed).",
              "", f"Raw numbers: `{os.path.basename(report)}.json`."]
    with open(report + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
