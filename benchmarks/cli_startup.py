"""Start-up time of the command line (wall time of a whole process).

    python benchmarks/cli_startup.py [--runs 9] [--model meta-llama_Llama-3.1-8B]

Prints the median and best wall time of
- `python -c pass` (the interpreter's own floor on this machine),
- `python -m llm_analysis.analysis infer --model_name <shipped> --output_format none`
  (the start-up figure; target < 0.3 s),
- the same with the readable report (`--output_format text`, which imports rich),
- the installed `llm-analysis` script, when it is on PATH,
and lists the heavy modules (transformers, torch, huggingface_hub, matplotlib,
rich, ...) each command imports — on a shipped model they must stay unimported —
and the slowest imports of the `none` run (from `python -X importtime`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HEAVY = ("transformers", "torch", "huggingface_hub", "matplotlib", "numpy", "requests", "rich", "pandas")
TARGET_S = 0.3


def _wall(cmd, runs: int, cwd: str, env: dict) -> list:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return times


def _imports(cmd, cwd: str, env: dict):
    """(heavy top-level packages imported, [(cumulative us, module)] slowest)."""
    proc = subprocess.run([cmd[0], "-X", "importtime"] + cmd[1:], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            rows.append((int(m.group(2)), len(m.group(3)), m.group(4)))
    heavy = sorted({name.split(".")[0] for _, _, name in rows if name.split(".")[0] in HEAVY})
    top = sorted(((us, name) for us, depth, name in rows if depth <= 1), reverse=True)[:8]
    return heavy, top


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--model", default="meta-llama_Llama-3.1-8B")
    ap.add_argument("--gpu", default="h100-sxm-80gb")
    args = ap.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1", NO_COLOR="1")
    cwd = tempfile.mkdtemp(prefix="llm_analysis_startup_")  # run the installed package, not a checkout
    flags = ["infer", "--model_name", args.model, "--gpu_name", args.gpu]
    py = sys.executable
    cases = [("python -c pass (interpreter floor)", [py, "-c", "pass"]),
             ("python -m llm_analysis.analysis infer --output_format none",
              [py, "-m", "llm_analysis.analysis"] + flags + ["--output_format", "none"]),
             ("python -m llm_analysis.analysis infer (text report)", [py, "-m", "llm_analysis.analysis"] + flags),
             ("python -m llm_analysis.analysis infer --output_format json",
              [py, "-m", "llm_analysis.analysis"] + flags + ["--output_format", "json"])]
    script = shutil.which("llm-analysis")
    if script:
        cases.append(("llm-analysis infer --output_format none (console script)",
                      [script] + flags + ["--output_format", "none"]))
    print(f"CLI start-up, {args.runs} runs each, model {args.model} on {args.gpu} (target < {TARGET_S} s)")
    for label, cmd in cases:
        times = _wall(cmd, args.runs, cwd, env)
        med, best = statistics.median(times), min(times)
        flag = "" if "floor" in label else ("  OK" if med < TARGET_S else "  over target")
        heavy = ""
        if cmd[0] == py and "-c" not in cmd:
            mods, _ = _imports(cmd, cwd, env)
            heavy = f"  heavy imports: {', '.join(mods) if mods else 'none'}"
        print(f"  {label:<62} median {med:.3f} s  best {best:.3f} s{flag}{heavy}")
    _, top = _imports(cases[1][1], cwd, env)
    print("slowest imports of the `none` run (cumulative):")
    for us, name in top:
        print(f"  {us / 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
