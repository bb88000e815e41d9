"""Every example script runs (fast, offline), prints its key results (loose patterns
below, with their published anchors) and exactly the output examples/README.md shows."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# Llama-2-70B decode on 8 x A100-40GB, batch 20, context 2048, by hand: 40 GiB of HBM less the
# weights (68.98e9 x 2 bytes / 8 = 17.245e9) over one sequence's KV cache (2 x 80 layers x 128
# KV dims per GPU x 2 bytes x 2048 tokens = 83 886 080 bytes) and decode activations (a few
# hidden-size vectors, under 64 KiB): 25.70e9 / 83.95e6 = 306.2 -> 306 (306.4 without them);
# the sister tool prints 271 (it counts 40e9 bytes)
DECODE_MAX_BATCH = (40 * 2**30 - 68.98e9 * 2 / 8) // (2 * 80 * 128 * 2 * 2048 + 65_536)

# script -> patterns its output must contain (key figures, checked loosely)
EXPECTED = {
    "llama2_70b_inference.py": [r"KV cache per GPU \(GB\)\s+1\.68\s+1\.68",
                                rf"decode max batch per GPU\s+271\s+{DECODE_MAX_BATCH:.0f}",
                                r"time per output token"],
    "llama3_serving.py": [r"Llama-3\.1-8B\s+h100-sxm-80gb\s+w16a16e16", r"Llama-3\.1-70B\s+h100-sxm-80gb\s+w16a16e16"
                          r"\s+1\s+does not fit", r"gpt-fast check.*predicted 9\d\.\d tokens/s"],
    "mixtral_serving.py": [r"46\.7 G parameters, 12\.9 G active", r"Mixtral-8x22B-v0\.1\s+h200-sxm-141gb",
                           r"batch\s+64: time per output token"],
    "megatron_gpt3_175b_training.py": [r"paper's formula\):\s+3[3-6]\.\d days",
                                       r"selective \+ sequence parallelism\s+13\.75s\s+1[2-5]\.\d\ds",
                                       r"full, no sequence parallelism\s+18\.13s\s+1[6-9]\.\d\ds"],
    "llama_65b_training.py": [r"paper\s+380\s+21\s+1,022,362", r"ours, flops_efficiency 0\.7\s+\d{3}\s+\d\d\.\d"],
    # 256 experts over 72 GPUs: refused alone, served with 32 copies (4 slots a GPU)
    "deepseek_nvl72_serving.py": [r"experts over 72\s+refused: moe_ep_size = 72 must divide moe_num_experts = 256",
                                  r"experts over 72 \+ 32\s+72\s+\d+ms\s+\d+\.\dms"],
    "capacity_planning.py": [r"h100-sxm-80gb\s+w16a16e16\s+tp\d pp\d", r"every layout considered"],
}


def scripts():
    return sorted(p.name for p in EXAMPLES.glob("*.py"))


def readme_outputs():
    """{script: every ```text block of its section in examples/README.md, joined} (a section names its
    script in its heading: `## ... (`examples/<script>`)`; the full report a section folds away under
    <details> is checked as its short table is: it went stale once, 1.57 s shown where 1.56 s was printed)."""
    out = {}
    for section in re.split(r"^## ", (EXAMPLES / "README.md").read_text(), flags=re.M)[1:]:
        named = re.search(r"\(`examples/([\w.-]+\.py)`\)", section.splitlines()[0])
        blocks = re.findall(r"^```text\n(.*?)^```", section, re.S | re.M)
        if named and blocks:
            out[named.group(1)] = "".join(blocks)
    return out


def test_every_example_is_checked_and_documented():
    assert scripts(), "no example scripts found"
    assert set(EXPECTED) <= set(scripts()), set(EXPECTED) - set(scripts())
    documented = readme_outputs()
    # every script in examples/ has a README section showing its output, and nothing else has one
    assert set(documented) == set(scripts()), set(documented) ^ set(scripts())


@pytest.mark.parametrize("script", scripts())
def test_example_runs(script, tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", NO_COLOR="1", MPLBACKEND="Agg")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    for pattern in EXPECTED.get(script, []):
        assert re.search(pattern, p.stdout), (script, pattern, p.stdout[-3000:])
    # the figures the README shows for this script are what it prints, line by line
    printed = {line.rstrip() for line in p.stdout.splitlines()}
    shown = [line.rstrip() for line in readme_outputs().get(script, "").splitlines()]
    assert shown, f"examples/README.md shows no output of {script}"
    stale = [line for line in shown if line not in printed]
    assert not stale, (script, "README lines the script no longer prints:", stale[:5])
    assert not list(tmp_path.iterdir()), "examples must not leave files behind"
