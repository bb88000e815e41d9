"""Coverage of the exact path (`llm_analysis.exact`, operators derived from the module tree)
over every model type of tests/data/architecture_truth.json.

For each type transformers can build, the default config goes through
`llm_analysis.exact.analysis_from_hf` (a fresh cache). Outcomes:
* "exact": parameters equal the truth's count and the prefill matmul FLOPs (batch 1,
  16 tokens, a different phase than the derivation probes) equal its FlopCounterMode count
  (for experts transformers runs densely, Llama 4: the described routed FLOPs plus
  (E/k - 1) x routed FLOPs from the expert weight shapes, dense_experts.py);
* "refused": UnsupportedArchitectureError (the message says why);
* "silently wrong": a number that differs from the truth (must never happen);
* "crashed": any other exception.
Slow (a few seconds per type: every model is built and run on meta tensors), so it
runs from scripts/architecture_coverage_report.py --exact, not in the test suite;
types run in worker subprocesses, in chunks.

    python tests/exact_coverage.py [type ...]     # print outcomes of some or all types
"""

from __future__ import annotations

import json
import os
import gzip
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

TESTS = Path(__file__).resolve().parents[1]
SUPPORT = Path(__file__).resolve().parent
ROOT = TESTS.parent
TRUTH_PATH = TESTS / "data" / "architecture_truth.json.gz"
CHUNK = 20


def _decode(obj: Any) -> Any:
    """The truth file writes non-finite floats as {"__float__": "Infinity"}."""
    if isinstance(obj, dict):
        if set(obj) == {"__float__"}:
            return float(obj["__float__"])
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def exact_outcome(truth: Dict[str, Any]) -> Dict[str, Any]:
    """The outcome of one type (in this process)."""
    from llm_analysis.config import get_gpu_config_by_name
    from llm_analysis.errors import UnsupportedArchitectureError
    from llm_analysis.exact import analysis_from_hf
    from llm_analysis.exact.compare import describes_backbone, engine_matmul_flops
    from llm_analysis.exact.dense_experts import eager_extra_flops
    try:
        a = analysis_from_hf(_decode(truth["config"]), get_gpu_config_by_name("a100-sxm-80gb"))
    except UnsupportedArchitectureError as exc:
        return {"outcome": "refused", "detail": str(exc)[:1500]}
    except Exception as exc:  # noqa: BLE001 - reported, never hidden
        return {"outcome": "crashed", "detail": f"{type(exc).__name__}: {str(exc)[:600]}"}
    # the LM class, or its backbone when the analysis has no LM head (a BERT-style family
    # row, which the exact path uses when it verifies: entry.py) - the table path's rule
    backbone = describes_backbone(a, truth)
    model_params = truth["base_params" if backbone else "params"]["total"]
    model_flops = truth.get("base_flops" if backbone else "flops")
    params, flops = int(a.get_num_params_total()), None
    diffs = []
    if params != model_params:
        diffs.append(f"params {params:,} vs {model_params:,}")
    if model_flops:
        b, t = truth["phase"]["batch_size"], truth["phase"]["seq_len"]
        flops = engine_matmul_flops(a, b, t)
        # experts transformers runs densely (Llama 4): the analysis reports the routed FLOPs;
        # FlopCounterMode's count is those + (E/k - 1) x routed, derived from the expert
        # weight shapes (dense_experts.py); 0 for every other description
        extra = eager_extra_flops(getattr(a.describer, "description", None), b, t)
        if flops + extra != model_flops["total"]:
            diffs.append(f"prefill FLOPs {flops:,}" + (f" + {extra:,} (experts run densely)" if extra else "")
                         + f" vs {model_flops['total']:,}")
    return {"outcome": "silently wrong" if diffs else "exact", "detail": "; ".join(diffs),
            "params": params, "flops": flops, "kinds": len(getattr(a.describer, "description", {}).get("kinds", ())) or None}


def _worker(types: List[str]) -> Dict[str, Dict[str, Any]]:
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    doc = json.loads(gzip.decompress(TRUTH_PATH.read_bytes()))["types"]
    return {mt: exact_outcome(doc[mt]) for mt in types}


def exact_outcomes(doc: Dict[str, Any], types: List[str] | None = None,
                   timeout_s: float = 1800) -> Dict[str, Dict[str, Any]]:
    """{type: outcome} for `types` (default: every type with truth), in worker
    subprocesses sharing one fresh cache directory."""
    types = types or [mt for mt, t in doc["types"].items() if t["status"] == "ok"]
    out: Dict[str, Dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, LLM_ANALYSIS_CACHE=cache, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
        for i in range(0, len(types), CHUNK):
            chunk = types[i:i + CHUNK]
            try:
                p = subprocess.run([sys.executable, str(Path(__file__)), "--worker"], input=json.dumps(chunk),
                                   capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout_s)
                res = json.loads(p.stdout.split("@@RESULTS@@", 1)[1]) if "@@RESULTS@@" in p.stdout else {}
                why = f"worker exited with {p.returncode}: {p.stderr.strip()[-300:]}"
            except subprocess.TimeoutExpired:
                res, why = {}, f"worker timed out after {timeout_s:.0f} s"
            for mt in chunk:
                out[mt] = res.get(mt) or {"outcome": "crashed", "detail": why}
    return out


def main(argv: List[str]) -> int:
    if argv[:1] == ["--worker"]:
        results = _worker(json.loads(sys.stdin.read()))
        print("@@RESULTS@@" + json.dumps(results))
        return 0
    doc = json.loads(gzip.decompress(TRUTH_PATH.read_bytes()))
    outcomes = exact_outcomes(doc, argv or None)
    for mt, o in outcomes.items():
        print(f"{mt}: {o['outcome']} {o.get('detail', '')[:300]}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
