"""Weight and KV-cache bytes per GPU (base units), from the operator records and
the describer's cache rules (`cached_len`, `kv_cache_elems_per_token_per_gpu`)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

from llm_analysis.model import sum_field
from llm_analysis.schema.options import DSZeRO
from llm_analysis.quantities.arguments import count, flag, optional_element_bytes, stage_index, zero_stage
from llm_analysis.quantities.params import ops0
from llm_analysis.quantities.phases import ONE_TOKEN, layer_mean


def zero_shard(a, ds_zero: DSZeRO, stage: int) -> int:
    """Ranks a state is split over once ZeRO reaches `stage`: the data-parallel
    shard group (dp_shard x cp; dp_size without HSDP or CP)."""
    return a.parallelism_config.shard_group_size if ds_zero.value >= stage else 1


def stage_weight_bytes(a, ds_zero=DSZeRO.NONE, groups: Optional[Tuple[str, ...]] = None) -> List[float]:
    """Weight bytes per GPU of each pipeline stage."""
    ds_zero = zero_stage(ds_zero)
    return [sum_field(a.describer.flat_ops(ONE_TOKEN, stage=s), "weight_bytes_per_gpu", groups)
            / zero_shard(a, ds_zero, 3) for s in range(a.parallelism_config.pp_size)]


def weights_per_gpu(a, ds_zero=DSZeRO.NONE) -> float:
    """Weight bytes on the most loaded GPU (the heaviest pipeline stage)."""
    ds_zero = zero_stage(ds_zero)
    return a.describer.memoized(("weights_per_gpu", ds_zero), lambda: max(stage_weight_bytes(a, ds_zero)))


def weights_per_layer(a, ds_zero=DSZeRO.NONE,
                      return_breakdown: bool = False) -> Union[float, Tuple[float, float, float, float]]:
    """Weight bytes of one layer on one GPU (mean over layers), TP/EP and ZeRO-3 sharded;
    with return_breakdown the tuple (total, attention, MLP, norm bytes), as llm-analysis 0.2.2 returns it."""
    ds_zero, return_breakdown = zero_stage(ds_zero), flag(return_breakdown, "return_breakdown")
    shard = zero_shard(a, ds_zero, 3)
    parts = {g: layer_mean(a, ONE_TOKEN, lambda ops, gs=gs: sum_field(ops, "weight_bytes_per_gpu", gs)) / shard
             for g, gs in (("attn", ("attention",)), ("mlp", ("mlp", "experts", "router")), ("layernorm", ("norm",)))}
    total = sum(parts.values())
    return (total, parts["attn"], parts["mlp"], parts["layernorm"]) if return_breakdown else total


def embedding(a, ds_zero=DSZeRO.NONE) -> float:
    ds_zero = zero_stage(ds_zero)
    return a.describer.memoized(("embedding_bytes", ds_zero), lambda: sum_field(
        ops0(a), "weight_bytes_per_gpu", ("embedding", "lm_head")) / zero_shard(a, ds_zero, 3))


def last_layernorm(a, ds_zero=DSZeRO.NONE) -> float:
    ds_zero = zero_stage(ds_zero)
    ops = a.describer.head_ops(ONE_TOKEN)
    return sum_field(ops, "weight_bytes_per_gpu", ("norm",)) / zero_shard(a, ds_zero, 3)


def kv_cache_total(a, batch_size: int, seq_len: int, kv_cache_dtype_bytes: Optional[float] = None,
                   stage: Optional[int] = None) -> float:
    """KV-cache bytes per GPU of all layers (or one pipeline stage): per layer,
    batch x cached tokens x cached elements per token x bytes per element;
    with context parallelism each rank caches its seq_len / cp tokens. Cross-attention
    layers add batch x encoder_seq_len x 2 x kv width (model/cross_attention.py); mixer
    layers (model/mixers.py) keep their constant-size state per sequence instead."""
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    kv_cache_dtype_bytes = optional_element_bytes(kv_cache_dtype_bytes, "kv_cache_dtype_bytes")
    if stage is not None:
        stage = stage_index(stage, a.parallelism_config.pp_size)
    d = a.describer_for(kv_cache_dtype_bytes)
    groups = d.layer_groups if stage is None else d.stage_groups[stage]
    self_kv = sum(n * batch_size * d.cached_len(k, seq_len) * d.kv_cache_elems_per_token_per_gpu(k) * d.kv_bytes
                  for k, n in groups.items()) / a.parallelism_config.cp_size
    # plus the cross-attention cache of an encoder-decoder decoder (encoder_seq_len positions per request)
    return (self_kv + d.cross_kv_cache_bytes_per_gpu(batch_size, sum(groups.values()))
            + batch_size * d.mixer_state_bytes_per_seq_per_gpu(groups))


def kv_cache_per_layer(a, batch_size: int, seq_len: int, kv_cache_dtype_bytes: Optional[float] = None) -> float:
    """KV-cache bytes per GPU of one layer: the mean over the layers (sliding-window layers
    keep fewer tokens, mixer layers a constant state)."""
    return kv_cache_total(a, batch_size, seq_len, kv_cache_dtype_bytes) / a.model_config.num_layers


def kv_cache_per_gpu(a, batch_size: int, seq_len: int, kv_cache_dtype_bytes: Optional[float] = None) -> float:
    """KV-cache bytes on the most loaded GPU (heaviest pipeline stage)."""
    return max(kv_cache_total(a, batch_size, seq_len, kv_cache_dtype_bytes, stage=s)
               for s in range(a.parallelism_config.pp_size))
