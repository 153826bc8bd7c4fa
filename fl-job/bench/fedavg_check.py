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
import concurrent.futures
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fedavg_torch  # noqa: E402


def run_ours(a, seed, out_dir):
    cmd = [a.fl_job, "fedavg", "--model", a.model, "--rounds", str(a.rounds),
           "--participants", str(a.participants), "--lr", str(a.lr), "--momentum", str(a.momentum),
           "--batch", str(a.batch), "--local-epochs", str(a.local_epochs), "--seed", str(seed),
           "--lr-decay", str(a.lr_decay), "--bn-calibration", str(a.bn_calibration),
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


def run_seed(a, seed):
    """Both sides of one seed: ours, then PyTorch's replay of the same run."""
    out_dir = os.path.join(a.work, f"seed{seed}")
    ours, ours_s = run_ours(a, seed, out_dir)
    print(f"ours  seed {seed}: {ours['rounds'][-1]['accuracy'] * 100:.2f} % "
          f"after {a.rounds} rounds, {ours_s:.1f} s", flush=True)
    theirs = fedavg_torch.replay(os.path.join(out_dir, "fedavg.json"), a.init, a.threads,
                                 a.data, log=lambda m: print(f"seed {seed}: {m}", flush=True))
    with open(os.path.join(out_dir, f"torch-{a.init}.json"), "w") as f:
        json.dump(theirs, f, indent=1)
    print(f"torch seed {seed}: {theirs['rounds'][-1]['accuracy'] * 100:.2f} %, "
          f"{theirs['wall_s']:.1f} s (+{theirs['load_s']:.1f} s loading)", flush=True)
    return {
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
    }


def largest_fall(acc, n):
    """The largest fall of a curve below an earlier round's best, in points, with the 95 %
    interval half-width (normal approximation over `n` evaluation samples) at that best and
    the round it happened in. A fall within the interval may be the evaluation's noise."""
    best, worst = acc[0], (0.0, 0.0, 0)
    for k, v in enumerate(acc[1:], 1):
        fall = (best - v) * 100
        if fall > worst[0]:
            worst = (fall, 196 * (best * (1 - best) / n) ** 0.5, k)
        best = max(best, v)
    return worst


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
    ap.add_argument("--lr-decay", type=float, default=1.0,
                    help="per-round learning-rate decay (fl-job fedavg --lr-decay; the replay reads it "
                    "from the run)")
    ap.add_argument("--bn-calibration", type=int, default=0,
                    help="held-out samples on which both sides re-estimate BatchNorm statistics "
                         "after every aggregation (0: FedAvg's averaged statistics)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="seeds run side by side (each seed's two sides still one after the other)")
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
    ap.add_argument("--from-json", metavar="REPORT.json",
                    help="re-render an earlier report's .md from its .json; runs nothing")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            out = summarise(json.load(f))
        render(out, a.from_json[:-len(".json")] if a.from_json.endswith(".json") else a.from_json)
        sys.exit(0 if out["pass"] else 1)
    if max(a.checkpoints) > a.rounds:
        sys.exit(f"fedavg_check: checkpoint {max(a.checkpoints)} is past --rounds {a.rounds}")
    date = datetime.date.today().isoformat()
    report = a.report or os.path.join(HERE, f"fedavg-check-{date}")

    if a.jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(a.jobs) as pool:
            runs = list(pool.map(run_seed, [a] * len(a.seeds), a.seeds))
    else:
        runs = [run_seed(a, seed) for seed in a.seeds]

    with open(os.path.join(a.work, "seed%d" % a.seeds[0], "fedavg.json")) as f:
        first = json.load(f)
    setup = {
        "date": date, "model": a.model, "rounds": a.rounds, "participants": a.participants,
        "lr": a.lr, "lr_decay": a.lr_decay, "bn_calibration": a.bn_calibration, "momentum": a.momentum, "batch": a.batch, "local_epochs": a.local_epochs,
        "seeds": a.seeds, "eval_samples": len(first["eval_set"]),
        "eval_seed": first["config"]["eval_seed"], "data": first["data"],
        "train_writers": first["train_writers"], "torch_init": a.init, "threads": a.threads,
        "torch": fedavg_torch.torch.__version__, "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(), "tolerance_points": a.tolerance,
        "checkpoints": a.checkpoints,
    }
    out = summarise({"schema": 1, "setup": setup, "runs": runs})
    with open(report + ".json", "w") as f:
        json.dump(out, f, indent=1)
    render(out, report)
    sys.exit(0 if out["pass"] else 1)


def summarise(out):
    """Adds the means over seeds and the checkpoint verdicts to a report's setup and runs."""
    setup, runs = out["setup"], out["runs"]
    rounds = list(range(setup["rounds"] + 1))

    def per_round(side, key):
        return [mean([r[side][key][k] for r in runs]) for k in rounds]

    mean_ours = [v * 100 for v in per_round("ours", "accuracy")]
    mean_torch = [v * 100 for v in per_round("torch", "accuracy")]
    checks = []
    for k in setup.setdefault("checkpoints", [5, 10, 20]):
        diff = mean_ours[k] - mean_torch[k]
        checks.append({"round": k, "ours": mean_ours[k], "torch": mean_torch[k], "diff": diff,
                       "pass": abs(diff) <= setup["tolerance_points"]})
    out.update({
        "checks": checks, "pass": all(c["pass"] for c in checks),
        "mean_accuracy": {"ours": mean_ours, "torch": mean_torch},
        "mean_loss": {"ours": per_round("ours", "loss"), "torch": per_round("torch", "loss")},
    })
    return out


def render(out, report):
    """Writes `report`.md from a summarised report and prints it."""
    setup, runs, checks = out["setup"], out["runs"], out["checks"]
    mean_ours, mean_torch = out["mean_accuracy"]["ours"], out["mean_accuracy"]["torch"]
    loss_ours, loss_torch = out["mean_loss"]["ours"], out["mean_loss"]["torch"]
    seeds, last = setup["seeds"], setup["rounds"]
    tail = list(range(max(1, last - 4), last + 1))

    def spread(side, k):
        xs = [r[side]["accuracy"][k] * 100 for r in runs]
        return statistics.stdev(xs) if len(xs) > 1 else float("nan")

    def wall(side):
        return ", ".join(f"{r[side]['wall_s']:.0f}" for r in runs)

    init = setup["torch_init"]
    lines = [
        f"# FedAvg against PyTorch, {setup['date']}" + (", shared initial weights" if init == "ours" else ""),
        "",
        f"`fl-job/bench/fedavg_check.py --init {init} --threads {setup['threads']}`: {setup['model']}, "
        f"{last} rounds, {setup['participants']} participants per round, lr {setup['lr']}"
        f" × {setup.get('lr_decay', 1.0)}^round, momentum "
        f"{setup['momentum']}, batch {setup['batch']}, {setup['local_epochs']} local epoch(s)"
        + (f", BatchNorm statistics re-estimated on {setup['bn_calibration']} held-out samples "
           "after every aggregation" if setup.get("bn_calibration") else "")
        + "; seeds "
        f"{seeds}; accuracy on {setup['eval_samples']} held-out test samples (the same for every run); "
        f"PyTorch {setup['torch']} starting from "
        + ("its own seeded initialisation" if init == "torch" else "our initial weights (init.f32)")
        + f". Data: {setup['data']} ({setup['train_writers']} train writers).",
        "",
        f"Mean accuracy over {len(seeds)} seeds at the checkpoints (tolerance "
        f"{setup['tolerance_points']} points): **{'PASS' if out['pass'] else 'FAIL'}**",
        "",
        "| round | ours % | PyTorch % | ours − PyTorch | seed-to-seed SD, ours / PyTorch | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c in checks:
        k = c["round"]
        lines.append(f"| {k} | {c['ours']:.2f} | {c['torch']:.2f} | {c['diff']:+.2f} | "
                     f"{spread('ours', k):.1f} / {spread('torch', k):.1f} | "
                     f"{'PASS' if c['pass'] else 'FAIL'} |")
    t_ours, t_torch = mean([mean_ours[k] for k in tail]), mean([mean_torch[k] for k in tail])
    lines += ["", f"Mean over rounds {tail[0]}–{tail[-1]} (less noisy than one round): ours "
              f"{t_ours:.2f} %, PyTorch {t_torch:.2f} % ({t_ours - t_torch:+.2f} points).",
              "", "Largest fall below an earlier round's best, points (95 % interval of that best "
              "in brackets; the round):", "",
              "| seed | ours | PyTorch |", "|---|---|---|"]
    n = setup["eval_samples"]
    for r in runs:
        cells = []
        for side in ("ours", "torch"):
            fall, half, k = largest_fall(r[side]["accuracy"], n)
            cells.append(f"{fall:.1f} (±{half:.1f}; round {k})" if k else "none")
        lines.append(f"| {r['seed']} | {cells[0]} | {cells[1]} |")
    last3 = {side: [mean([x * 100 for x in r[side]["accuracy"][-3:]]) for r in runs]
             for side in ("ours", "torch")}
    lines += ["", "Mean of the last 3 evaluations per seed: ours "
              + ", ".join(f"{v:.1f}" for v in last3["ours"]) + " %; PyTorch "
              + ", ".join(f"{v:.1f}" for v in last3["torch"]) + " %."]
    lines += ["", "Every round (means over seeds; per seed: ours / PyTorch accuracy %):", "",
              "| round | ours % | PyTorch % | diff | ours loss | PyTorch loss | "
              + " | ".join(f"seed {s}" for s in seeds) + " |",
              "|---" * (6 + len(seeds)) + "|"]
    for k in range(last + 1):
        per = " | ".join(f"{r['ours']['accuracy'][k] * 100:.1f} / {r['torch']['accuracy'][k] * 100:.1f}"
                         for r in runs)
        lines.append(f"| {k} | {mean_ours[k]:.2f} | {mean_torch[k]:.2f} | "
                     f"{mean_ours[k] - mean_torch[k]:+.2f} | {loss_ours[k]:.3f} | {loss_torch[k]:.3f} | {per} |")
    lines += ["", f"Wall time per seed (s, {setup['threads']} thread(s) each, one side after the other, "
              f"on a shared 2-core machine): ours {wall('ours')} (fl-job process, incl. loading the data); "
              f"PyTorch {wall('torch')} (plus {mean([r['torch']['load_s'] for r in runs]):.0f} s "
              f"parsing the LEAF JSON per seed).",
              "", f"Raw numbers: `{os.path.basename(report)}.json`."]
    with open(report + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
