"""Parameter counts: the sum of the operators' `params` (tied weights counted
once); active parameters are those one token's forward uses: an operator's own
`active_params` where the describer sets it (experts of LongCat-Flash and JetMoE's
attention), else a routed expert's top-k share (`expert_role == "routed"`) in a MoE
layer, else all of its `params`."""

from __future__ import annotations

import logging
from typing import Dict, List, Optional, Tuple

from llm_analysis.model import LayerKind, Operator, sum_field
from llm_analysis.quantities.arguments import flag
from llm_analysis.quantities.phases import ONE_TOKEN, as_count, layer_mean
from llm_analysis.errors import warn

logger = logging.getLogger(__name__)


def ops0(a) -> List[Operator]:
    """Operators of the whole model for a 1-token phase."""
    return a.describer.memoized("ops0", lambda: a.describer.flat_ops(ONE_TOKEN))


def routed_expert_params(ops: List[Operator], attr: str = "params") -> float:
    return sum(getattr(o, attr) for o in ops if o.is_routed_expert)


def layer_mean_field(a, attr: str, groups: Tuple[str, ...]):
    return as_count(layer_mean(a, ONE_TOKEN, lambda ops: sum_field(ops, attr, groups)))


def embedding(a, shared_embedding: bool = True) -> int:
    ops = ops0(a)
    n = sum_field(ops, "params", ("embedding",))
    if not flag(shared_embedding, "shared_embedding"):
        head = sum_field(ops, "params", ("lm_head",))
        if not head and a.model_config.lm_head and a.model_config.tie_word_embeddings:
            # the model's own count: its output projection is the input embedding (transformers counts it once);
            # the mirrored system took the flag as the model's and counted a copy, vocab x hidden more
            warn(logger, "shared_embedding=False on %s, which ties its output projection to its input embedding: "
                         "the count is the model's (no separate output embedding); a separate copy would add "
                         "vocab_size x hidden_dim = %d parameters", a.model_config.name,
                         a.model_config.vocab_size * a.model_config.hidden_dim)
        n += head
    return int(n)


def output_embedding(a) -> int:
    return int(sum_field(ops0(a), "params", ("lm_head",)))


def last_layernorm(a) -> int:
    return int(sum_field(a.describer.head_ops(ONE_TOKEN), "params", ("norm",)))


def total(a) -> int:
    return a.describer.memoized("params_total", lambda: int(sum_field(ops0(a), "params")))


def op_active_params(m, kind: LayerKind, o: Operator) -> float:
    """Parameters of operator `o` (in a layer of `kind`) one token uses."""
    if o.active_params is not None:
        return o.active_params
    if o.is_routed_expert and kind.moe:
        return o.params * (m.moe_top_k / m.moe_num_experts)
    return o.params


def _active_layer(a, kind: LayerKind, ops: List[Operator]) -> float:
    """Parameters one token uses in a layer of this kind."""
    m = a.model_config
    return sum(op_active_params(m, kind, o) for o in ops)


def active_per_layer(a):
    d = a.describer
    s = sum(n * _active_layer(a, kind, d.layer_ops(ONE_TOKEN, kind)) for kind, n in d.layer_groups.items())
    return as_count(s / a.model_config.num_layers)


def active_total(a) -> int:
    def compute() -> int:
        t = total(a)
        m = a.model_config
        for kind, n in a.describer.layer_groups.items():
            t -= n * sum(o.params - op_active_params(m, kind, o) for o in a.describer.layer_ops(ONE_TOKEN, kind))
        return int(round(t))
    return a.describer.memoized("active_params_total", compute)


def active_without_input_embedding(a) -> int:
    """Active parameters without the input-embedding table: a token's lookup reads one row of it,
    so some model cards leave it out of their "active" figure (OpenAI's gpt-oss card: 5.13 B of
    gpt-oss-120b's 116.83 B), while others count it whole (Qwen3-30B-A3B's "3.3 B activated",
    Mixtral's "12.9 B"), as `active_total` does. A tied table stays: it is the LM head too."""
    if a.model_config.tie_word_embeddings:
        return active_total(a)
    # (every summary carries it: counted once per describer, not over its operators each call)
    return a.describer.memoized("active_params_without_input_embedding", lambda: active_total(a) - embedding(a))


def breakdown(a) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for o in ops0(a):
        out[o.group] = out.get(o.group, 0) + o.params
    return {k: int(v) for k, v in out.items() if v}


def heaviest_stage_params_per_gpu(a, groups: Optional[Tuple[str, ...]] = None) -> Tuple[float, float]:
    """(dense params per GPU, routed-expert params per GPU) of the heaviest pipeline stage."""
    return a.describer.memoized(("heaviest_stage_params", groups), lambda: _heaviest_stage_params(a, groups))


def _heaviest_stage_params(a, groups: Optional[Tuple[str, ...]]) -> Tuple[float, float]:
    best = (0.0, 0.0)
    for s in range(a.parallelism_config.pp_size):
        ops = a.describer.flat_ops(ONE_TOKEN, stage=s)
        experts = sum(o.params_per_gpu for o in ops if o.is_routed_expert and (groups is None or o.group in groups))
        dense = sum_field(ops, "params_per_gpu", groups) - experts
        if dense + experts > sum(best):
            best = (dense, experts)
    return best
