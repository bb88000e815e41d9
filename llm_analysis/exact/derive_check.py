"""Check a derived description against the model it was read from (torch-free): per module,
the FLOPs `ModuleTreeDescriber` predicts for the probe against FlopCounterMode's; in total,
parameters against numel (tied once) and prefill FLOPs at both probes.
`verify_description` raises UnsupportedArchitectureError listing the differences.
"""

from __future__ import annotations

from typing import Any, Dict, List

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.model import Phase
from llm_analysis.exact.dense_experts import eager_extra_flops, spec_extra_flops
from llm_analysis.exact.layer_phase import pad_of, padded_phase, prefix_of, prefixed_phase

_GPU = "a100-sxm-80gb"  # any GPU: parameters and FLOPs do not depend on it


def build_analysis(desc: Dict[str, Any], name: str, gpu_config: Any = None, **kwargs: Any) -> Any:
    """An LLMAnalysis whose describer is the description's."""
    from llm_analysis.config import get_gpu_config_by_name
    from llm_analysis.exact.exact_analysis import analysis_class
    from llm_analysis.exact.tree_model import model_config_for
    return analysis_class(desc)(model_config_for(desc, name), gpu_config or get_gpu_config_by_name(_GPU), **kwargs)


def _module_rows(desc: Dict[str, Any]):
    """(where, spec, owns) for every spec of the model, layers once per kind."""
    for s in desc["embedding"]:
        yield "", s, True
    seen = set()
    for k, owns in desc["layers"]:
        if k not in seen:
            seen.add(k)
            for s in desc["kinds"][k]:
                yield f"layer kind {k}: ", s, True
    for s in desc["head"]:
        yield "", s, True


def module_differences(desc: Dict[str, Any], analysis: Any) -> List[str]:
    """'where module: description F, FlopCounterMode G' for every module that differs."""
    probe = desc["probe"]
    phase = Phase("prefill", probe["batch"], probe["seq_len"], probe["seq_len"])
    d = analysis.describer
    predicted: Dict[str, float] = {}
    measured: Dict[str, int] = {}
    out: List[str] = []
    for where, s, owns in _module_rows(desc):
        key = where + s.get("module", s["name"])
        if s["op"] == "unexplained":
            out.append(f"{key}: computes {s.get('probe_flops', 0):,} FLOPs the module tree does not explain "
                       f"({s.get('class', 'no projection')})")
            continue
        if s.get("tokens") == "unknown":
            out.append(f"{key}: sees a number of rows per call that is neither every token nor one per sequence")
        if s.get("expert_role") == "routed" and not (desc.get("experts") or {}).get("top_k"):
            out.append(f"{key}: routed experts but no top-k in the config")
            continue
        # layers run the prefixed and padded phase (layer_phase.py; the phase itself without either)
        run = prefixed_phase(phase, prefix_of(desc)) if where else phase
        run = padded_phase(run, pad_of(desc)) if where else run
        ops = d._spec_op(run, s, None, owns)
        # experts transformers runs densely: + (E/k - 1) x routed FLOPs (dense_experts.py)
        extra = spec_extra_flops(s, run.tokens, (desc.get("experts") or {}).get("top_k") or 0)
        predicted[key] = predicted.get(key, 0.0) + sum(o.flops for o in ops) + extra
        measured[key] = measured.get(key, 0) + int(s.get("probe_flops", 0))
    for key in predicted:
        if int(round(predicted[key])) != measured[key]:
            out.append(f"{key}: description {predicted[key]:,.0f} FLOPs, FlopCounterMode {measured[key]:,}")
    return out


def total_differences(desc: Dict[str, Any], analysis: Any) -> List[str]:
    from llm_analysis.exact.compare import engine_matmul_flops
    probe = desc["probe"]
    out = []
    params = int(analysis.get_num_params_total())
    if params != probe["params"]:
        out.append(f"parameters: description {params:,}, model {probe['params']:,}")
    for p in (probe, desc.get("probe_long")):
        if p is None:
            continue
        flops = engine_matmul_flops(analysis, p["batch"], p["seq_len"])
        extra = eager_extra_flops(desc, p["batch"], p["seq_len"])  # dense_experts.py; 0 for most
        if flops + extra != p["flops"]:
            also = f" + {extra:,} run densely by transformers" if extra else ""
            out.append(f"prefill FLOPs (batch {p['batch']}, {p['seq_len']} tokens): description "
                       f"{flops:,}{also}, FlopCounterMode {p['flops']:,}")
    return out


def verify_description(desc: Dict[str, Any], name: str) -> None:
    """Raise UnsupportedArchitectureError naming the modules where `desc` differs."""
    try:
        analysis = build_analysis(desc, name)
    except UnsupportedArchitectureError:
        raise
    except Exception as exc:  # the engine cannot even hold the description
        raise UnsupportedArchitectureError(
            f"{name}: the module tree could not be turned into an operator description "
            f"({type(exc).__name__}: {str(exc)[:300]})") from None
    diffs = module_differences(desc, analysis)
    if not diffs:
        try:
            diffs = total_differences(desc, analysis)
        except Exception as exc:  # the analysis cannot run on the description
            diffs = [f"the analysis fails on the description ({type(exc).__name__}: {str(exc)[:300]})"]
    if diffs:
        shown = diffs[:12] + ([f"... and {len(diffs) - 12} more"] if len(diffs) > 12 else [])
        raise UnsupportedArchitectureError(
            f"{name}: the description derived from the transformers module tree does not match the model "
            "exactly; refusing rather than printing a wrong number:\n  " + "\n  ".join(shown))
