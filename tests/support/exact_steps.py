"""FlopCounterMode's count of one decode step of the transformers model (meta device,
the cache of a real prefill), for the exact-path tests: the independent figure a
described decode step is checked against (needs torch)."""

import torch
from torch.utils.flop_counter import FlopCounterMode

from llm_analysis.exact.flops import _custom_formulas
from llm_analysis.exact.meta_model import build_meta_models, config_object
from llm_analysis.exact.probe import _masks_built_without_reading_values


def decode_step(cfg, batch, prompt_len):
    """(FLOPs of one decode step after a `prompt_len`-token prefill, the cache object)."""
    lm = build_meta_models(config_object(cfg), with_base=False).lm.eval()
    ids = torch.zeros(batch, prompt_len, dtype=torch.long, device="meta")
    counter = FlopCounterMode(display=False, custom_mapping=_custom_formulas())
    with torch.no_grad(), _masks_built_without_reading_values():
        cache = lm(input_ids=ids, use_cache=True).past_key_values
        with counter:
            lm(input_ids=ids[:, :1], past_key_values=cache, use_cache=True)
    return int(counter.get_total_flops()), cache


def matmul_flops(analysis, phase, batch, seq_len, context_len=None):
    """The analysis's FLOPs of what FlopCounterMode counts (matmuls, attention cores,
    convolutions, scans) for one phase."""
    rows = analysis.operators(phase, batch, seq_len, context_len=context_len, per_layer=False)
    return int(sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention", "conv", "scan")))
