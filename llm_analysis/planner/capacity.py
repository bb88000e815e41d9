"""plan_serving_capacity: GPUs and nodes (with the layout) to serve a user
population or request rate under latency targets, for a prompt / output
length distribution.

The distribution is given as (length, weight) pairs or {"mean": m, "p90": q};
a mean/p90 pair becomes two equally weighted points, m and q (the p90 point
sizes the KV cache for long requests, the mean the load). The plan sizes for
the *largest* prompt and output of the distribution (every request must fit a
batch slot) and for the request-weighted mean request time (the load), which is
conservative: memory is sized at the longest context, load at the mean."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from llm_analysis.errors import ConfigError
from llm_analysis.planner.inference import plan_inference
from llm_analysis.planner.inputs import SLO, positive_number

Distribution = Union[Sequence[Tuple[int, float]], Mapping[str, float], int]


def _points(dist: Distribution, name: str) -> List[Tuple[int, float]]:
    if isinstance(dist, int) and not isinstance(dist, bool) and dist > 0:
        return [(dist, 1.0)]
    if isinstance(dist, Mapping):
        if set(dist) != {"mean", "p90"}:
            raise ConfigError(f"{name} = {dict(dist)!r}: a mapping must have exactly the keys 'mean' and 'p90'")
        mean, p90 = positive_number(dist["mean"], f"{name}['mean']"), positive_number(dist["p90"], f"{name}['p90']")
        if p90 < mean:
            raise ConfigError(f"{name}: p90 = {p90:g} is below mean = {mean:g}")
        return [(math.ceil(mean), 0.5), (math.ceil(p90), 0.5)]
    try:
        pts = [(int(n), float(w)) for n, w in dist]
    except (TypeError, ValueError):
        raise ConfigError(f"{name} = {dist!r} must be a positive length, [(length, weight), ...] or "
                          "{'mean': m, 'p90': q}") from None
    if not pts or any(n < 1 or w < 0 for n, w in pts) or sum(w for _, w in pts) <= 0:
        raise ConfigError(f"{name} = {dist!r}: lengths must be >= 1, weights >= 0 and not all zero")
    return pts


def plan_serving_capacity(model, gpus: Sequence, *, prompt_len: Distribution, output_len: Distribution,
                          slo: Union[None, SLO, Mapping] = None, users: Optional[int] = None,
                          requests_per_user_per_s: Optional[float] = None, **plan_kwargs) -> Dict[str, Any]:
    """GPUs, nodes and layout to serve `slo.request_rate_per_s` (or `users` x
    `requests_per_user_per_s`). Other keyword arguments go to plan_inference
    (dtypes, objective, gpu_prices, max_gpus, ...). Returns {"num_gpus",
    "num_nodes", "layout", "batch_size_per_gpu", "replicas", "request_rate_per_s",
    "sized_for", "plan"}."""
    slo = SLO.from_any(slo)
    if users is not None or requests_per_user_per_s is not None:
        if users is None or requests_per_user_per_s is None:
            raise ConfigError("users and requests_per_user_per_s go together: give both or use slo.request_rate_per_s")
        if slo.request_rate_per_s is not None:
            raise ConfigError("give either users x requests_per_user_per_s or slo.request_rate_per_s, not both")
        rate = positive_number(users, "users") * positive_number(requests_per_user_per_s, "requests_per_user_per_s")
        slo = SLO(slo.max_ttft_s, slo.max_tpot_s, rate, slo.min_tokens_per_s)
    if slo.request_rate_per_s is None:
        raise ConfigError("slo.request_rate_per_s (or users and requests_per_user_per_s) is needed to size capacity")
    prompts, outputs = _points(prompt_len, "prompt_len"), _points(output_len, "output_len")
    s_max, n_max = max(n for n, _ in prompts), max(n for n, _ in outputs)
    w_out = sum(w for _, w in outputs)
    n_mean = sum(n * w for n, w in outputs) / w_out
    # size for the longest request (memory, latency); scale the offered load by the
    # mean over the longest request time (request time ~ linear in the output length)
    load_scale = (n_mean + 1) / (n_max + 1)
    sized = SLO(slo.max_ttft_s, slo.max_tpot_s, slo.request_rate_per_s * load_scale, slo.min_tokens_per_s)
    plan_kwargs.setdefault("objective", "fewest_gpus")
    plan = plan_inference(model, gpus, sized, seq_len=s_max, num_tokens_to_generate=n_max, **plan_kwargs)
    best = plan.best
    return {"num_gpus": best["figures"]["num_gpus"], "num_nodes": best["figures"]["num_nodes"],
            "layout": best["layout"], "batch_size_per_gpu": best["figures"]["batch_size_per_gpu"],
            "replicas": best["figures"]["replicas"], "request_rate_per_s": slo.request_rate_per_s,
            "sized_for": {"seq_len": s_max, "num_tokens_to_generate": n_max, "mean_output_len": n_mean,
                          "load_scale": load_scale,
                          "method": "memory and latency at the longest prompt and output; load = rate x "
                                    "(mean output + 1) / (longest output + 1) of the longest request's replicas"},
            "plan": plan}
