"""Compute sites inside an attention module that does more than the eager core.

Some encoders compute, next to q.k^T and scores.v, matmuls whose FLOPs grow with the
tokens only: ConvBERT's span-based dynamic convolution (Jiang et al. 2020,
arXiv 2008.02496, sec. 3.2) multiplies every unfolded span of `k` positions by a
kernel of `k` weights generated per token and head, i.e. 2 x heads x head_dim x k
FLOPs per token. The attention module's own FLOPs are then the core plus a per-token
remainder: described as the core and a `row_flops` spec (FLOPs per row of the
module's input). The remainder must divide evenly per token at the probe, and the
long probe (a different length: a quadratic remainder would not scale linearly)
checks the split against FlopCounterMode.

Torch-free; used by `derive.py`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List


def attention_sites(core: Dict[str, Any], own_per_exec: int, eager_per_exec: int,
                    remainder_rows: Callable[[int], Dict[str, Any]]) -> List[Dict[str, Any]]:
    """[core] when the module's own FLOPs are the eager core's, [core, per-token
    remainder] when they exceed it by a whole number of FLOPs per row, else [core]
    (the per-module check then refuses with both figures). `remainder_rows(flops)`:
    the row_flops spec of `flops` FLOPs per layer execution."""
    extra = own_per_exec - eager_per_exec
    if extra <= 0:
        return [core]
    rows = remainder_rows(extra)
    if rows["op"] != "row_flops":
        return [core]
    rows["name"] = f"{core['name']}.per_token"
    rows["group"] = "attention"
    return [core, rows]


def grouped_linear_spec(name: str, params: Dict[str, Any], total: int, tokens: str, calls: int,
                        routed: bool, group: str) -> Dict[str, Any] | None:
    """A grouped linear layer (ConvBERT's `GroupedLinearLayer`, arXiv 2008.02496 sec. 3.3:
    the input split into G groups, each projected by its own [in/G, out/G] block) as the
    spec of a kernel-1 convolution with G groups: 2 x out x in/G FLOPs per token, the same
    parameters. Only a module outside any expert structure (`routed` False), with a
    3-D `weight` [G, in/G, out/G] and at most a 1-D bias of `out`; else None."""
    weight, bias = params.get("weight"), params.get("bias")
    if routed or weight is None or weight.dim() != 3 or set(params) - {"weight", "bias"}:
        return None
    g, d_in, d_out = (int(x) for x in weight.shape)
    if bias is not None and (bias.dim() != 1 or int(bias.shape[0]) != g * d_out):
        return None
    return {"name": name, "op": "conv", "params": int(total), "tokens": tokens, "calls": int(calls),
            "group": group, "in": g * d_in, "out": g * d_out, "bias": bias is not None, "copies": 1,
            "expert_role": None, "tp": "replicated", "kernel": 1, "conv_groups": g, "padding": 0}
