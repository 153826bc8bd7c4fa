#!/usr/bin/env python3
"""Writes the [[jobs]] of scripts/experiments/fig9.toml: the paper's testbed workload of 20
FL jobs, half ResNet-18 and half MobileNet-V2, over the four eligibility specifications,
arriving as a Poisson process. Rerun it to change the draws; the header of fig9.toml is kept.

    python3 scripts/experiments/fig9-jobs.py > /tmp/jobs.toml

Draws (Python's `random`, seed 9): inter-arrival gaps Exp(mean 600 s) after the first job at
0 s; each job's target participants from {8, 10, 12}. The model alternates (even jobs
ResNet-18, odd MobileNet-V2) and the spec cycles General, High-Performance, Memory-Rich,
Compute-Rich over pairs of jobs, so each model meets every spec. Deadlines follow the demand
(as the authors' testbed scales its timeouts with demand): 8 results in 5 min, 10 in 10, 12 in
15.
"""
import random

SPECS = [
    ("general", "General (96% of devices)", "min_mem_score = 10, min_cpu_score = 1, min_os_version = 6"),
    ("high", "High-Performance (scarce: 43%)", "min_mem_score = 1000, min_cpu_score = 7, min_os_version = 6"),
    ("memory", "Memory-Rich (52%)", "min_mem_score = 1000, min_cpu_score = 1, min_os_version = 6"),
    ("compute", "Compute-Rich (56%)", "min_mem_score = 10, min_cpu_score = 7, min_os_version = 6"),
]
MODELS = [
    ("resnet18", "resnet18-femnist", "{ width = 4, bn_calibration = 500, train = { lr = 0.1, batch_size = 20, local_epochs = 2 } }"),
    ("mobilenet", "mobilenet_v2-femnist", "{ width = 0.25, bn_calibration = 500, train = { lr = 0.05, lr_decay = 0.93, batch_size = 20, local_epochs = 2 } }"),
]
DEADLINE = {8: 300, 10: 600, 12: 900}

rng = random.Random(9)
t = 0.0
for i in range(20):
    if i > 0:
        t += rng.expovariate(1 / 600)
    target = rng.choice([8, 10, 12])
    short, name, req = SPECS[(i // 2) % 4]
    model, task, params = MODELS[i % 2]
    print(f"""# {name}, {model}
[[jobs]]
name = "job{i:02}-{model}-{short}"
task = "{task}"
params = {params}
arrival_s = {round(t)}
rounds = 24
target_participants = {target}
deadline_s = {DEADLINE[target]}
requirement = {{ {req} }}
seed = {i}
max_attempts = 1000
""")
