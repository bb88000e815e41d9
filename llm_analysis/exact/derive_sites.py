"""Compute sites inside an attention module that does more than the eager core.

ConvBERT's span-based dynamic convolution (Jiang et al. 2020, arXiv 2008.02496, sec. 3.2)
multiplies every span of `k` positions by a kernel generated per token and head:
2 x heads x head_dim x k FLOPs per token beside q.k^T and scores.v. Such a module is
described as the core plus a per-token `row_flops` remainder, which must divide evenly
at the probe; the long probe (another length) checks the split. Torch imported lazily.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Dict, List, Optional, Tuple


FIT_SEQ_LEN = 48  # the third prefill's length (batch 1): neither the probe's nor the long probe's


def _fit(probe_point: Tuple[int, int, int], fit_point: Tuple[int, int, int]) -> Optional[Tuple[Fraction, Fraction]]:
    """(FLOPs per sequence per query-key pair, per token) of FLOPs y = batch x (a x T^2 + b x T)
    through two (batch, T, y) points, or None."""
    (b1, t1, y1), (b2, t2, y2) = probe_point, fit_point
    if y2 < 0 or t1 == t2:
        return None
    per_seq1, per_seq2 = Fraction(y1, b1 * t1), Fraction(y2, b2 * t2)
    a = (per_seq2 - per_seq1) / (t2 - t1)
    return a, per_seq1 - a * t1


def attention_sites(core: Dict[str, Any], own_per_exec: int, eager_per_exec: int,
                    remainder_rows: Callable[[int], Dict[str, Any]], probe_shape: Tuple[int, int],
                    fit_point: Optional[Tuple[int, int, int]] = None) -> List[Dict[str, Any]]:
    """[core] when the module's own FLOPs are the eager core's; else the core and a
    per-token remainder (`row_flops`), with the pairwise work fitted through the probe and
    `fit_point` (batch, seq_len, own FLOPs at a third length): ConvBERT's remainder is per
    token, XLNet's relative-position scores (Dai et al. 2019, arXiv 1901.02860; Yang et
    al. 2019, arXiv 1906.08237) add q x r^T against the klen + qlen = 2T relative
    positions, i.e. a score width of d_qk + 2 d_qk per query-key pair. A score width other
    than d_qk is recorded as `score_width` (prefill and training only: a decode step's
    relative positions are not described, describer refuses it). [core] when nothing fits
    (the per-module check then refuses with both figures). `remainder_rows(flops)`: the
    row_flops spec of `flops` FLOPs per layer execution."""
    if own_per_exec == eager_per_exec:
        return [core]
    batch, seq = probe_shape
    fitted = _fit((batch, seq, own_per_exec), fit_point) if fit_point else None
    calls = max(core["calls"], 1)
    per_pair = 2 * core["heads"] * calls
    if fitted is None or fitted[0] % per_pair or fitted[1] < 0:
        return [core]
    width = int(fitted[0] // per_pair) - core["d_v"]
    if width < 1:
        return [core]
    core = dict(core, score_width=width) if width != core["d_qk"] else core
    extra = own_per_exec - batch * seq * seq * per_pair * (width + core["d_v"])
    if extra == 0:
        return [core]
    rows = remainder_rows(extra)
    if rows["op"] != "row_flops":
        return [core]
    rows["name"] = f"{core['name']}.per_token"
    rows["group"] = "attention"
    return [core, rows]


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
