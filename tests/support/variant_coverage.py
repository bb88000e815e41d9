"""Shared by tests/test_variant_coverage.py and scripts/variant_coverage_report.py:
import every varied config of tests/data/variant_truth.json.gz through the table path
(`llm_analysis.hub.entry.model_config_from_hf_dict`, the mapping the Hub import runs
after download) and classify it against the real model's figures recorded there,
with the same rule as the default-config check (tests/architecture_coverage.py):
exact / refused / silently wrong / crashed.
"""

from __future__ import annotations

import gzip
import json
import logging
import multiprocessing
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

from architecture_coverage import classify

TESTS = Path(__file__).resolve().parents[1]
SUPPORT = Path(__file__).resolve().parent
VARIANT_TRUTH_PATH = TESTS / "data" / "variant_truth.json.gz"


def load_variant_truth(path: Path = VARIANT_TRUTH_PATH) -> Dict[str, Any]:
    """The truth file (gzip-compressed JSON, written by scripts/generate_variant_truth.py)."""
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def buildable(doc: Dict[str, Any]) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """(model type, variant, truth) of every variant transformers could build."""
    for mt, per_variant in doc["types"].items():
        for name, truth in per_variant.items():
            if truth["status"] == "ok":
                yield mt, name, truth


def import_result(config: Dict[str, Any], name: str) -> Dict[str, Any]:
    """What the Hub client reports for one config: {"ok": ModelConfig dump} or the error."""
    from llm_analysis.hub.entry import model_config_from_hf_dict
    try:
        return {"ok": model_config_from_hf_dict(config, name).model_dump()}
    except Exception as exc:  # classified: the package's own error is a refusal
        return {"error": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
                "message": str(exc)}


def classify_variant(mt: str, name: str, truth: Dict[str, Any]) -> Dict[str, Any]:
    result = import_result(truth["config"], f"variant/{mt}/{name}")
    out = classify(result, truth)
    if out["outcome"] == "exact" and out["verdict"].get("flops_exact") is False:
        v = out["verdict"]  # parameters right, prefill FLOPs not: as wrong as a bad count
        out = {"outcome": "silently wrong", "verdict": v, "causes": ["prefill FLOPs"],
               "detail": f"prefill FLOPs engine {v['engine_flops']:,} vs FlopCounterMode "
                         f"{v['model_flops']:,}"}
    return out


def _classify_types(args: Tuple[Dict[str, Any], List[str]]) -> Dict[str, Dict[str, Any]]:
    logging.disable(logging.WARNING)
    doc, types = args
    sub = {"types": {mt: doc["types"][mt] for mt in types}}
    return {f"{mt}/{name}": classify_variant(mt, name, truth) for mt, name, truth in buildable(sub)}


def classify_variants(doc: Dict[str, Any], processes: int = 0) -> Dict[str, Dict[str, Any]]:
    """{"type/variant": outcome} for every buildable variant, in `processes` forked
    workers (default: one per CPU, at most 4; the check is CPU-bound)."""
    import llm_analysis.hub.entry  # noqa: F401 - imported once, before forking
    import transformers  # noqa: F401
    types = sorted(doc["types"])
    n = processes or min(4, os.cpu_count() or 1)
    if n <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return _classify_types((doc, types))
    chunks = [(doc, types[i::n]) for i in range(n)]
    with multiprocessing.get_context("fork").Pool(n) as pool:
        parts = pool.map(_classify_types, chunks)
    return dict(sorted(kv for part in parts for kv in part.items()))


def counts(outcomes: Dict[str, Dict[str, Any]]) -> Dict[str, int]:
    c: Dict[str, int] = {}
    for o in outcomes.values():
        c[o["outcome"]] = c.get(o["outcome"], 0) + 1
    return c
