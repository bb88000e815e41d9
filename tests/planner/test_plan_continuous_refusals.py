"""What a continuous-batching plan says when no candidate meets every target."""

from __future__ import annotations

import subprocess
import sys


def test_a_gpu_limit_refusal_states_the_users_limit():
    """Llama-3.1-70B on H100s at 20 requests/s: the best layout is workers of tp 4, of which 5 keep up (20 GPUs).
    Under --max_gpus 19 the refusal compares 20 GPUs with the 19 the user allowed (5.3% over), not with the 16
    that four whole workers make (it had said '20 GPUs vs 16 GPUs (25.0% over the limit)')."""
    p = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "plan", "infer", "meta-llama/Llama-3.1-70B",
                        "h100-sxm-80gb", "--max_ttft", "0.5", "--max_tpot", "0.05", "--request_rate", "20",
                        "--max_gpus", "19"], capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "max_gpus = 20 GPUs vs 19 GPUs" in p.stderr and f"{20 / 19 - 1:.1%} over the limit" in p.stderr, p.stderr
