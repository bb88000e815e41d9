"""The setup lines at the top of the report: model, GPU, data types, layout and
the achieved rates the roofline uses (read from the analysis's configs and its
hardware views)."""

from __future__ import annotations

import itertools
from typing import List, Tuple

from llm_analysis.cost.calibrated import CalibratedCostModel, call_cost_model
from llm_analysis.model.checkpoint_weights import only_routed_experts_low_bit


def _model_line(m) -> str:
    kv = m.num_key_value_heads or m.n_head
    head_dim = getattr(m, "head_dim", None) or m.hidden_dim // m.n_head
    attn = "MHA" if kv == m.n_head else ("MQA" if kv == 1 else "GQA")
    parts = [f"{m.num_layers} layers", f"hidden {m.hidden_dim}",
             f"{m.n_head} heads ({attn}, {kv} KV heads, head dim {head_dim})"]
    if getattr(m, "kv_lora_rank", None):
        parts[-1] = f"{m.n_head} heads (MLA, KV latent {m.kv_lora_rank})"
    if not getattr(m, "has_attention", True):
        parts.pop()  # a pure state-space model: its one nominal head is never used
    parts += _mixer_parts(m)
    ffn = getattr(m, "ffn_embed_dim", None) if getattr(m, "has_mlp_layers", True) else None
    if ffn:
        parts.append(f"FFN {ffn}{' gated' if m.mlp_gated_linear_units else ''}")
    if getattr(m, "moe_num_experts", 1) > 1:
        moe = f"{m.moe_num_experts} experts top-{m.moe_top_k}"
        if getattr(m, "moe_num_shared_experts", 0):
            moe += f" + {m.moe_num_shared_experts} shared"
        if getattr(m, "moe_latent_dim", None):  # routed experts in a latent space (Nemotron-3)
            moe += f", routed in a {m.moe_latent_dim}-wide latent"
        parts.append(moe)
    if getattr(m, "sliding_window", None):
        parts.append(f"sliding window {m.sliding_window}")
    parts.append(f"vocab {m.vocab_size}")
    if m.max_seq_len:
        parts.append(f"max context {m.max_seq_len}")
    return f"{m.name}: " + ", ".join(parts)


def _mixer_parts(m) -> List[str]:
    """How many layers of each mixer kind (operators/mixers.py) the model has."""
    types = [t for t in (getattr(m, "layer_types", None) or []) if t in getattr(m, "mixer_kinds", ())]
    counts = {t: types.count(t) for t in dict.fromkeys(types)}
    return [f"{n} {t.replace('_', ' ')} layers" for t, n in counts.items()]


def _gpu_line(analysis) -> str:
    g = analysis.gpu_config
    link = getattr(g, "intra_node_link", "nvlink")
    link = {"nvlink": "NVLink", "pcie": "PCIe", "xgmi": "xGMI"}.get(link, link)
    # both units: an HBM spec sheet's "80 GB" is 80 GiB, which the catalogue holds as 85.9 decimal GB
    return (f"{g.name}: {g.memory_bytes / 1e9:.4g} GB ({g.mem_per_GPU_in_GB:g} GiB) of memory at "
            f"{g.hbm_bandwidth_in_GB_per_sec:g} GB/s, "
            f"{g.peak_fp16_TFLOPS:g} TFLOP/s dense 16-bit; {link} {g.intra_node_bandwidth_in_GB_per_sec:g} GB/s "
            f"within a node, {g.inter_node_bandwidth_in_GB_per_sec:g} GB/s per GPU across nodes")


def _dtype_line(analysis) -> str:
    d = analysis.dtype_config
    def bits(n, f):
        return f"{n}-bit{' ' + f if f and (n <= 8 or f == 'tf32') else ''}"
    wf = getattr(d, "weight_format", "")
    af = getattr(d, "activation_format", "")
    line = (f"{d.name}: weights {bits(d.weight_bits, wf)}, activations {bits(d.activation_bits, af)}, "
            f"embeddings {d.embedding_bits}-bit")
    if getattr(d, "quant_group_size", None):
        line += f", quantisation groups of {d.quant_group_size}"
    if only_routed_experts_low_bit(analysis.model_config, d):  # (gpt-oss: model/checkpoint_weights.py)
        line += (f"; as the checkpoint stores them, the routed experts alone in {wf}, every other weight 16-bit "
                 "(checkpoint_quantized_weights = 'routed_experts')")
    return line


def _runs(counts) -> str:
    """7, 8, 8, 8, 7 as '7, 3 x 8, 7'."""
    runs = [[c, len(list(g))] for c, g in itertools.groupby(counts)]
    return ", ".join(str(c) if k == 1 else f"{k} x {c}" for c, k in runs)


def _layout_line(analysis) -> str:
    p = analysis.parallelism_config
    per_replica = p.tp_size * p.cp_size * p.pp_size
    extra = f" · cp {p.cp_size} ({p.cp_comm})" if p.cp_size > 1 else ""
    if p.dp_replicate > 1:
        extra += f" · dp_shard {p.dp_shard} x dp_replicate {p.dp_replicate}"
    if (p.num_layers_in_first_pipeline_stage or p.num_layers_in_last_pipeline_stage  # uneven stages
            or p.account_for_embedding_in_pipeline_split or p.account_for_loss_in_pipeline_split):
        extra += " · layers per stage " + _runs([sum(g.values()) for g in analysis.describer.stage_groups])
    return (f"tp {p.tp_size} · pp {p.pp_size} · dp {p.dp_size} · ep {p.ep_size} · sp {p.sp_size}{extra}  "
            f"({per_replica} GPU{'s' if per_replica > 1 else ''} per model replica, "
            f"{per_replica * p.dp_size} in all)")


def _rates(model, given_tflops, given_bw) -> str:
    """'<TFLOP/s> (<share> of peak), <GB/s> (<share> of HBM peak)' of a cost model: the share is
    computed from the rates, so it is true whatever set them (efficiencies, given rates, a profile)."""
    tflops, bw = model.achieved_tflops, model.achieved_hbm_GB_per_s
    peak_tflops = model.peak_flops_per_s / 1e12
    peak_bw = model.gpu.hbm_bandwidth_in_GB_per_sec
    c = f"{tflops:.4g} TFLOP/s ({tflops / peak_tflops:.0%} of peak{', given as achieved_tflops' if given_tflops else ''})"
    m = f"{bw:.4g} GB/s ({bw / peak_bw:.0%} of HBM peak{', given as achieved_memory_bandwidth_GBs' if given_bw else ''})"
    return f"{c}, {m}"


def _rate_rows(analysis, training: bool = False) -> List[Tuple[str, str]]:
    """The rates the times use. Under a calibrated model two sets: the profile's plateaus (what the
    expected times reach on large kernels) and the roofline's (what the lower bounds use). A training
    report states its training view's (cost/choice.py `training`: compute at the profile's
    training_compute_efficiency), the rates its times and its summary's flops_efficiency use; an inference
    report without CUDA graphs (kernel_launch "eager" or "native") its sustained view's, likewise."""
    given = analysis.achieved_tflops is not None, analysis.achieved_memory_bandwidth_GBs is not None
    bound = _rates(analysis.lower_bound_cost_model, *given)
    if analysis.profile is None:
        ridge = (f"ridge point {analysis.get_ridge_point():.0f} FLOPs/byte (operators above it are "
                 "compute-bound)")
        return [("achieved rates", f"{bound}; {ridge}")]
    model = call_cost_model(analysis.cost_model, analysis.kernel_launch, training)  # the view the call was timed with
    share = ""
    if isinstance(model, CalibratedCostModel) and model.compute_share != 1.0:
        share = f", with the {'training' if training else 'sustained'} compute share of {model.compute_share:.0%}"
    ridge = (f"ridge point {model.ridge_point:.0f} FLOPs/byte (operators above it are compute-bound)")
    expected = _rates(model, False, False)
    return [("expected rates", f"large GEMMs and streaming at {expected} (calibrated plateaus{share}; smaller "
                               f"kernels reach less); {ridge}"),
            ("lower-bound rates", bound)]


def setup_rows(analysis, training: bool = False) -> List[Tuple[str, str]]:
    """The setup lines; `training`: a training report's (its rates the training view's)."""
    return [("model", _model_line(analysis.model_config)), ("GPU", _gpu_line(analysis)),
            ("data types", _dtype_line(analysis)), ("parallelism", _layout_line(analysis)),
            *_rate_rows(analysis, training)]
