#!/usr/bin/env python3
"""Wall time of one FedAvg round, fl-job against a PyTorch FedAvg loop, alternated in one run.

A round is what `fl-job fedavg` does per round: 10 writers train from the global weights
(2 local epochs, batch 20 by default), their updates are averaged and the result is scored
on 2,000 held-out samples. Per model and repetition, three runs one after another:

- `ours-serial`: `fl-job fedavg --lanes 1`, the participants one after another, each with
  its kernels over all rayon threads (how rounds ran before lanes);
- `ours`: `fl-job fedavg` (lanes: the participants side by side, one thread each);
- `torch`: `fedavg_torch.py` replaying the `ours` run (same writers, batches, evaluation set,
  initial weights) with `--threads` torch threads;
- with `--stacked`, `ours-stacked`: `fl-job fedavg --stack-clients` (the round's clients as
  one computation, every layer grouped by client; the same weights as `ours`, which is
  checked on the last round's file).

Seconds per round = (wall at the last round - wall after round 0's evaluation) / rounds, so
process start, data loading and the initial evaluation are left out and every round's
evaluation is in. Writes REPORT.md and REPORT.json.

Usage (the torch venv of fl-job/TRAINING.md; an idle machine):
    python3 fl-job/bench/round_bench.py --torch /tmp/torchenv/bin/python \
        --report fl-job/bench/round-bench-2026-12-06
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SIDES = ["ours-serial", "ours", "torch"]


def per_round(rounds):
    """Seconds per round from a list of {round, wall_s} records (round 0 first)."""
    return (rounds[-1]["wall_s"] - rounds[0]["wall_s"]) / (len(rounds) - 1)


def run_ours(a, model, out, lanes, binary=None, extra=()):
    cmd = [binary or a.fl_job, "fedavg", "--model", model, "--rounds", str(a.rounds),
           "--participants", str(a.participants), "--local-epochs", str(a.local_epochs),
           "--batch", str(a.batch), "--eval-samples", str(a.eval_samples),
           "--lanes", str(lanes), "--out", out, *extra]
    if a.data:
        cmd += ["--data", a.data]
    env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads), RUST_LOG="warn")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "fedavg.json")) as f:
        return per_round(json.load(f)["rounds"])


def run_torch(a, run_dir):
    out = os.path.join(run_dir, "torch.json")
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [a.torch, os.path.join(here, "fedavg_torch.py"), os.path.join(run_dir, "fedavg.json"),
           "--out", out, "--init", "ours", "--threads", str(a.threads)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return per_round(json.load(f)["rounds"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fl-job", default="target/release/fl-job", help="the fl-job binary")
    ap.add_argument("--before", help="an earlier fl-job binary, run side by side (lanes) as a "
                    "fourth side `before`, alternated with the others")
    ap.add_argument("--stacked", action="store_true",
                    help="also run `fl-job fedavg --stack-clients` as a side `ours-stacked`")
    ap.add_argument("--torch", default="/tmp/torchenv/bin/python", help="python with torch")
    ap.add_argument("--models", default="resnet18:4,resnet18:8,mobilenet_v2:0.25,mobilenet_v2:0.5")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2, help="alternations of the three sides")
    ap.add_argument("--participants", type=int, default=10)
    ap.add_argument("--local-epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--eval-samples", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2, help="rayon threads (ours), torch threads")
    ap.add_argument("--data", help="FEMNIST directory (default: fl-job's lookup order)")
    ap.add_argument("--work", default="results/round-bench", help="per-run files")
    ap.add_argument("--report", default="results/round-bench/report",
                    help="report path without extension (.md and .json are written)")
    a = ap.parse_args()

    models = a.models.split(",")
    sides = SIDES + (["before"] if a.before else []) + (["ours-stacked"] if a.stacked else [])
    times = {m: {s: [] for s in sides} for m in models}
    t0 = time.time()
    for rep in range(a.reps):
        for m in models:
            base = os.path.join(a.work, m.replace(":", "-"))
            times[m]["ours-serial"].append(run_ours(a, m, base + "-serial", 1))
            times[m]["ours"].append(run_ours(a, m, base, 0))
            times[m]["torch"].append(run_torch(a, base))
            if a.before:
                times[m]["before"].append(run_ours(a, m, base + "-before", 0, a.before))
            if a.stacked:
                last = f"round-{a.rounds}.f32"
                times[m]["ours-stacked"].append(
                    run_ours(a, m, base + "-stacked", 0, extra=("--stack-clients", "--save-rounds")))
                run_ours(a, m, base + "-check", 0, extra=("--save-rounds",))
                with open(os.path.join(base + "-stacked", last), "rb") as x, \
                        open(os.path.join(base + "-check", last), "rb") as y:
                    if x.read() != y.read():
                        sys.exit(f"{m}: stacked weights differ from the lanes' ({last})")
            row = {s: f"{times[m][s][-1]:.3f}" for s in sides}
            print(f"rep {rep} {m}: {row}", file=sys.stderr, flush=True)

    rows = []
    for m in models:
        med = {s: statistics.median(times[m][s]) for s in sides}
        rows.append({
            "model": m,
            "seconds_per_round": times[m],
            "median": med,
            "torch_over_ours": med["torch"] / med["ours"],
            "serial_over_ours": med["ours-serial"] / med["ours"],
            **({"before_over_ours": med["before"] / med["ours"]} if a.before else {}),
            **({"stacked_over_ours": med["ours-stacked"] / med["ours"]} if a.stacked else {}),
        })
    report = {
        "schema": 1,
        "settings": {k: v for k, v in vars(a).items() if k not in ("work", "report")},
        "cpu": cpu_name(),
        "wall_s": time.time() - t0,
        "rows": rows,
    }
    os.makedirs(os.path.dirname(a.report) or ".", exist_ok=True)
    with open(a.report + ".json", "w") as f:
        json.dump(report, f, indent=1)
    with open(a.report + ".md", "w") as f:
        f.write(markdown(report))
    print(markdown(report))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def markdown(r):
    s = r["settings"]
    out = [
        f"# One FedAvg round: fl-job against PyTorch ({r['cpu']}, {s['threads']} threads)",
        "",
        f"{s['participants']} writers, {s['local_epochs']} local epochs, batch {s['batch']}, "
        f"evaluation of {s['eval_samples']} samples included; {s['rounds']} rounds per run, "
        f"{s['reps']} alternations, medians. Command: `python3 fl-job/bench/round_bench.py "
        f"--models {s['models']} --reps {s['reps']} --rounds {s['rounds']}"
        f"{' --stacked' if s.get('stacked') else ''}`.",
        "",
        "| model | fl-job one after another (s/round) | fl-job side by side (s/round) "
        "| PyTorch (s/round) | PyTorch ÷ fl-job | serial ÷ side by side |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        m = row["median"]
        out.append(f"| {row['model']} | {m['ours-serial']:.3f} | {m['ours']:.3f} | "
                   f"{m['torch']:.3f} | {row['torch_over_ours']:.2f}× | "
                   f"{row['serial_over_ours']:.2f}× |")
    if s.get("before"):
        out += ["", f"Before (`{s['before']}`, side by side), alternated with the above:", "",
                "| model | before (s/round) | now (s/round) | before ÷ now |", "|---|---:|---:|---:|"]
        for row in r["rows"]:
            m = row["median"]
            out.append(f"| {row['model']} | {m['before']:.3f} | {m['ours']:.3f} | "
                       f"{row['before_over_ours']:.2f}× |")
    if s.get("stacked"):
        out += ["", "Each round's clients as one computation (`--stack-clients`), alternated "
                "with the above; the last round's weights were the same bytes as the lanes':", "",
                "| model | stacked (s/round) | side by side (s/round) | stacked ÷ side by side |",
                "|---|---:|---:|---:|"]
        for row in r["rows"]:
            m = row["median"]
            out.append(f"| {row['model']} | {m['ours-stacked']:.3f} | {m['ours']:.3f} | "
                       f"{row['stacked_over_ours']:.2f}× |")
    out += ["", f"Whole run: {r['wall_s']:.0f} s.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    main()
