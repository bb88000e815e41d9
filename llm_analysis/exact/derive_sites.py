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

Used by `derive.py` during a derivation (torch imported inside functions only).
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


def core_helper_children(path: str, module: Any, probe_flops: Dict[str, int], eager_flops: Callable[[], int]
                         ) -> Dict[str, int]:
    """{child path: FLOPs} of the parameter-free children that compute an attention
    module's core between them (SqueezeBERT's `matmul_qk` and `matmul_qkv` wrappers
    around torch.matmul), when the module computes nothing itself and those children's
    FLOPs add up to exactly the eager core's (`eager_flops()`); else {}. The module is
    then described as the core, and the children as computing nothing of their own."""
    children = {}
    for name, child in module.named_children():
        child_path = f"{path}.{name}" if path else name
        if probe_flops.get(child_path, 0) > 0 and not any(True for _ in child.parameters()):
            children[child_path] = probe_flops[child_path]
    if len(children) < 2 or sum(children.values()) != eager_flops():
        return {}
    return children


def layer_calls(path: str, module: Any, calls: Dict[str, int]) -> int:
    """Runs of a layer in one forward. A layer whose `forward` its stack calls directly
    (SqueezeBERT: `layer.forward(...)`, which bypasses module hooks) ran as often as its
    children, when they all ran equally often; 0 when nothing says it ran."""
    if calls.get(path, 0):
        return calls[path]
    ran = {calls[f"{path}.{name}"] for name, _ in module.named_children() if calls.get(f"{path}.{name}", 0)}
    return ran.pop() if len(ran) == 1 else 0


def same_length_conv_rows(module: Any, elems: List[int]) -> List[int] | None:
    """Positions a 1-D convolution saw per call (its input is [batch, channels, length]:
    elements / in_channels), for a convolution whose output is as long as its input
    (stride 1, padding (kernel - 1) x dilation / 2 per side: SqueezeBERT's and ConvBERT's
    kernel-1 and depthwise convolutions), so that it reads one row per token. None for
    any other module (a causal convolution's padded output is longer than the tokens)."""
    import torch
    if not isinstance(module, torch.nn.Conv1d) or not isinstance(module.padding, tuple):
        return None
    (k,), (s,), (d,), (p,) = module.kernel_size, module.stride, module.dilation, module.padding
    if s != 1 or 2 * p != d * (k - 1):
        return None
    return [e // module.in_channels for e in elems]
