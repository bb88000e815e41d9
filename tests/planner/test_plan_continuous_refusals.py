"""What a continuous-batching plan says when no candidate meets every target."""

from __future__ import annotations

import re
import subprocess
import sys


def test_a_gpu_limit_refusal_states_the_users_limit():
    """Llama-3.1-70B on H100s at 20 requests/s (20 GPUs unconstrained). Under --max_gpus 19 a layout whose
    fewest workers that keep up need more GPUs is compared with the 19 the user allowed, its share over the
    limit being its GPUs / 19 - 1, not with the GPUs of the whole workers that fit under it (it had said
    '20 GPUs vs 16 GPUs (25.0% over the limit)')."""
    p = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "plan", "infer", "meta-llama/Llama-3.1-70B",
                        "h100-sxm-80gb", "--max_ttft", "0.5", "--max_tpot", "0.05", "--request_rate", "20",
                        "--max_gpus", "19"], capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    found = re.search(r"max_gpus = (\d+) GPUs vs 19 GPUs \(([\d.]+)% over the limit\)", p.stderr)
    assert found, p.stderr
    gpus = int(found.group(1))
    assert gpus > 19 and found.group(2) == f"{(gpus / 19 - 1) * 100:.1f}", p.stderr


def test_an_impossible_plan_names_every_target_out_of_reach():
    """Llama-3.1-70B on H100s: a request alone reaches ~12 ms per token and ~100 ms to its first at best, so
    neither a 1 ms TPOT nor a 10 ms TTFT is reachable by any fleet. The refusal names both targets (a user who
    loosened only the one named would be refused again), continuous and static alike."""
    for extra in ((), ("--batching", "static")):
        p = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "plan", "infer", "meta-llama/Llama-3.1-70B",
                            "h100-sxm-80gb", "--max_ttft", "0.01", "--max_tpot", "0.001", "--request_rate", "20",
                            *extra], capture_output=True, text=True)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "(TPOT) target" in p.stderr and "(TTFT) target" in p.stderr, (extra, p.stderr)


def test_max_ep_on_a_dense_model_is_refused_and_a_refusal_names_the_load():
    """--max_ep bounds the experts' spread, which a dense model does not have (it had been ignored, the plan
    unchanged); and a refusal for want of GPUs names the load that asked for them beside the lengths."""
    base = [sys.executable, "-m", "llm_analysis.analysis", "plan", "infer", "meta-llama/Llama-3.1-70B", "h100-sxm-80gb",
            "--max_ttft", "0.5", "--max_tpot", "0.05", "--request_rate", "20"]
    p = subprocess.run(base + ["--max_ep", "2"], capture_output=True, text=True)
    assert p.returncode == 2 and "max_ep = 2" in p.stderr and "has no experts" in p.stderr, p.stderr
    p = subprocess.run(base + ["--max_gpus", "19"], capture_output=True, text=True)
    assert p.returncode == 2 and "20 requests/s" in p.stderr, p.stderr
