"""Side-by-side training and inference throughput: `fl-job bench` against the PyTorch
reference (torch_reference.py), alternated in one run on the same machine, then one
Markdown table with each side's range and the Burn / PyTorch ratios.

    python3 fl-job/bench/side_by_side.py --python /tmp/torchenv/bin/python \
        --fl-job target/release/fl-job --threads 2 --seconds 8 --rounds 2 --out bench.json

Run it on an idle machine (it prints the load average before and after); both sides get
the same thread count (RAYON_NUM_THREADS for Burn, torch.set_num_threads for PyTorch).

`--isa avx2` holds both sides to AVX2 on a wider CPU: FL_JOB_ISA for fl-job, and for
PyTorch all three of its kernel libraries — ATEN_CPU_CAPABILITY (ATen's own kernels),
ONEDNN_MAX_CPU_ISA (oneDNN, which runs its convolutions and ignores ATen's setting) and
MKL_ENABLE_INSTRUCTIONS (MKL's GEMMs). ATen's setting alone left oneDNN on `jit:avx512_core`
(its ONEDNN_VERBOSE lines say so), which is how the 2026-12-07 "AVX2" comparison came to
pit AVX2 against AVX-512.
"""
import argparse, json, os, subprocess, sys, tempfile

MODELS = ["resnet18:64", "resnet18:16", "mobilenet_v2:1.0", "mobilenet_v2:0.5"]


def norm(spec):
    # `mobilenet_v2:1` and `mobilenet_v2:1.0` name the same model.
    name, _, width = spec.partition(":")
    return f"{name}:{float(width):g}" if width else name


def isa_env(args, side):
    """The environment that holds `side` to `--isa` (nothing when it is `native`)."""
    if args.isa == "native":
        return {}
    if side == "burn":
        return {"FL_JOB_ISA": args.isa}
    return {"ATEN_CPU_CAPABILITY": args.isa, "ONEDNN_MAX_CPU_ISA": args.isa.upper(),
            "MKL_ENABLE_INSTRUCTIONS": args.isa.upper()}


def burn(args, models):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads), RUST_LOG="warn",
                   **isa_env(args, "burn"))
        cmd = [args.fl_job, "bench", "--models", ",".join(models), "--seconds",
               str(args.seconds), "--batch", str(args.batch), "--json", f.name]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        rows = json.load(open(f.name))["rows"]
    return {norm(r["model"]): (r["train_samples_per_s"], r["infer_samples_per_s"]) for r in rows}


def torch(args, models):
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [args.python, os.path.join(here, "torch_reference.py"), "--threads",
           str(args.threads), "--seconds", str(args.seconds), "--batch", str(args.batch), *models]
    env = dict(os.environ, **isa_env(args, "torch"))
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    return {norm(r["model"]): (r["train"], r["infer"]) for r in rows}


def span(values, digits=1):
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if abs(hi - lo) < 10 ** -digits else f"{lo:.{digits}f}–{hi:.{digits}f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable, help="a Python with torch installed")
    p.add_argument("--fl-job", default="target/release/fl-job")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2, help="alternations of the two sides")
    p.add_argument("--isa", default="native", choices=["native", "avx2"],
                   help="hold both sides to this instruction set (see the module doc)")
    p.add_argument("--out", help="write every measurement here as JSON")
    args = p.parse_args()
    models = args.models.split(",")
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    runs = []
    for r in range(args.rounds):
        # Alternate which side goes first, so drift in the machine's speed hits both.
        order = [("burn", burn), ("torch", torch)]
        if r % 2:
            order.reverse()
        for name, fn in order:
            print(f"round {r + 1}: {name} …", file=sys.stderr, flush=True)
            runs.append({"round": r + 1, "side": name, "rows": fn(args, models)})
    print(f"load average after: {os.getloadavg()}", file=sys.stderr)
    if args.out:
        json.dump({"isa": args.isa, "threads": args.threads, "batch": args.batch, "seconds": args.seconds,
                   "runs": runs}, open(args.out, "w"), indent=1)
    print("| model | Burn train | PyTorch train | ratio | Burn infer | PyTorch infer | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m in map(norm, models):
        cols = []
        for i in (0, 1):
            b = [run["rows"][m][i] for run in runs if run["side"] == "burn"]
            t = [run["rows"][m][i] for run in runs if run["side"] == "torch"]
            # Ratio of each round's pair, so a slow moment of the machine cancels out.
            ratios = [x / y for x, y in zip(b, t)]
            cols += [span(b), span(t), span(ratios, 2)]
        print(f"| {m} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    main()
