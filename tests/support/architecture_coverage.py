"""Shared by tests/test_architecture_coverage.py and scripts/architecture_coverage_report.py:
import every model type's default config through the loopback Hub and classify the
outcome against the cached truth (tests/data/architecture_truth.json.gz).

Outcomes: "exact" (our parameter count equals the transformers model's), "refused"
(the package's own error: UnsupportedArchitectureError / HubImportError / another
ConfigError), "silently wrong" (a number that differs), "crashed" (any other
exception), "no truth" (transformers itself could not build the type).
"""

from __future__ import annotations

import json
import gzip
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

TESTS = Path(__file__).resolve().parents[1]
SUPPORT = Path(__file__).resolve().parent
ROOT = TESTS.parent
TRUTH_PATH = TESTS / "data" / "architecture_truth.json.gz"
REPO_PREFIX = "truth"  # Hub ids served: truth/<model_type>
GPU = "a100-sxm-80gb"


def load_truth() -> Dict[str, Any]:
    with gzip.open(TRUTH_PATH, "rt") as f:
        return json.load(f)


def _client_env(endpoint: str, home: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_")) and "PROXY" not in k.upper()}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1",
               NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    return env


def import_through_hub(configs: Dict[str, Dict[str, Any]], timeout_s: float = 150) -> Dict[str, dict]:
    """{model_type: client result} for `get_model_config_from_hf("truth/<type>")`, run by
    the real huggingface_hub client in one subprocess against the loopback Hub."""
    sys.path.insert(0, str(SUPPORT))
    from hub_server import FakeHub
    repos = {f"{REPO_PREFIX}/{mt}": {"main": {"config.json": json.dumps(cfg).encode()}}
             for mt, cfg in configs.items()}
    ops = [{"op": "config_hf", "name": f"{REPO_PREFIX}/{mt}"} for mt in configs]
    with tempfile.TemporaryDirectory() as tmp, FakeHub(repos, max_lifetime=timeout_s + 30) as hub:
        p = subprocess.run([sys.executable, str(SUPPORT / "hub_server.py"), "client"],
                           input=json.dumps(ops), capture_output=True, text=True, cwd=ROOT,
                           env=_client_env(hub.endpoint, Path(tmp) / "hf-home"), timeout=timeout_s)
    assert "@@RESULTS@@" in p.stdout, f"hub client crashed:\n{p.stderr[-4000:]}"
    results = json.loads(p.stdout.split("@@RESULTS@@", 1)[1])["results"]
    return dict(zip(configs, results))


def classify(result: dict, truth: Dict[str, Any]) -> Dict[str, Any]:
    """The outcome of one imported type: {"outcome", "detail", "causes", ...}."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ModelConfig, get_gpu_config_by_name
    from llm_analysis.errors import ConfigError
    from llm_analysis.exact.compare import compare, engine_parts, truth_params_for
    from llm_analysis.exact.diagnose import mismatched_features

    if "error" in result:
        refused = {"UnsupportedArchitectureError", "HubImportError", "ConfigError"} & set(result["mro"])
        return {"outcome": "refused" if refused else "crashed",
                "detail": f"{result['error']}: {result['message'][:300]}"}
    cfg = ModelConfig(**result["ok"])
    try:
        # the truth is the causal-LM class run without encoder states: no cross-attention work
        analysis = LLMAnalysis(cfg, get_gpu_config_by_name(GPU)).with_encoder_seq_len(0)
        verdict = compare(analysis, truth)
    except ConfigError as exc:  # the engine refuses the imported description
        return {"outcome": "refused", "detail": f"{type(exc).__name__}: {str(exc)[:300]}"}
    if verdict["params_exact"]:
        return {"outcome": "exact", "detail": "", "verdict": verdict}
    params = truth_params_for(analysis, truth)
    return {"outcome": "silently wrong", "verdict": verdict,
            "causes": mismatched_features(cfg, params, engine_parts(analysis)),
            "detail": (f"engine {verdict['engine_params']:,} vs transformers "
                       f"{verdict['model_params']:,} ({verdict['engine_params'] / verdict['model_params'] - 1:+.1%}); "
                       + "; ".join(verdict["param_differences"]))}


def classify_all(doc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    logging.disable(logging.WARNING)
    types = doc["types"]
    buildable = {mt: t["config"] for mt, t in types.items() if t["status"] == "ok"}
    results = import_through_hub(buildable)
    out = {mt: {"outcome": "no truth", "detail": t.get("error", t["status"])}
           for mt, t in types.items() if t["status"] != "ok"}
    for mt, res in results.items():
        out[mt] = classify(res, types[mt])
    return dict(sorted(out.items()))


def counts(outcomes: Dict[str, Dict[str, Any]]) -> Dict[str, int]:
    c: Dict[str, int] = {}
    for o in outcomes.values():
        c[o["outcome"]] = c.get(o["outcome"], 0) + 1
    return c


def silently_wrong(outcomes: Dict[str, Dict[str, Any]]) -> List[str]:
    return [mt for mt, o in outcomes.items() if o["outcome"] == "silently wrong"]


def flops_wrong(outcomes: Dict[str, Dict[str, Any]]) -> List[str]:
    """Types with exact parameters whose prefill FLOPs differ from FlopCounterMode's."""
    return [mt for mt, o in outcomes.items()
            if o["outcome"] == "exact" and (o.get("verdict") or {}).get("flops_exact") is False]
