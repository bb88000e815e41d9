"""Rows of the Hub family table for state-space models and attention / mixer hybrids. Their mixer
layers are the kinds of `model/mixers.py`; a hybrid whose mixer those kinds do not describe has no row
and is refused by the generic mapping, naming its mixer (hub/generic.py).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from llm_analysis.hub.families.bases import ATTENTION_BIAS, LLAMA, QWEN3, QWEN_MOE_EXPERTS
from llm_analysis.hub.errors import UnmappableConfig, UnsupportedArchitecture
from llm_analysis.hub.source import Fields, Src, moe_layout
from llm_analysis.hub.spec import Act, Family, Flag, MoeRule, Opt, Refuse, Req, Same, Sum

__all__ = ["HYBRID_FAMILIES"]

# transformers' per-layer kinds -> ModelConfig.layer_types ("linear_attention" is the
# configs' name for their mixer layers; LFM2 calls its convolution layers "conv")
_ATTENTION_KINDS = {"full_attention": "full_attention", "attention": "full_attention"}
_MIXER_NAMES = ("linear_attention", "mamba", "conv")


class MixerLayers:
    """A step: `layer_types` from the config's per-layer kinds (every layer the mixer
    when the config lists none), each layer named in `names` of kind `mixer`.

    `indices_key`: the config names its attention layers by index instead (BambaConfig's
    attn_layer_indices, from which its layers_block_type property builds the kinds: layer i
    attends when i is listed). Read from the raw config.json too, when transformers did not
    build the config object, so a hybrid is never counted as all-mixer for want of the property."""

    def __init__(self, mixer: str, key: str = "layer_types", names: tuple = _MIXER_NAMES,
                 indices_key: Optional[str] = None):
        self.mixer, self.key, self.names, self.indices_key = mixer, key, names, indices_key

    def __call__(self, src: Src, f: Fields, what: str) -> None:
        n = f.get("num_layers")
        if n is None:
            return
        kinds = src.get(self.key, default=None)
        if kinds is None and self.indices_key is not None:
            kinds = self._kinds_from_indices(src.get(self.indices_key, default=None), n, what)
        if kinds is None:
            f["layer_types"] = [self.mixer] * n
            return
        kinds = [str(k) for k in kinds]
        odd = sorted(set(kinds) - set(_ATTENTION_KINDS) - set(self.names))
        if odd or len(kinds) != n:
            raise UnsupportedArchitecture(f"{what}: {self.key} = {kinds[:8]}{'...' if len(kinds) > 8 else ''} "
                                   f"({len(kinds)} entries for {n} layers, kinds {odd or 'known'}): one "
                                   f"attention or {self.mixer} layer per layer is what ModelConfig describes")
        f["layer_types"] = [_ATTENTION_KINDS.get(k, self.mixer) for k in kinds]

    def _kinds_from_indices(self, indices: Any, n: int, what: str) -> Optional[list]:
        """The per-layer kinds of attention-layer `indices` (None: none listed, every layer the mixer,
        as transformers builds it); indices that are not layer numbers are refused, not guessed at."""
        if indices is None:
            return None
        if not isinstance(indices, (list, tuple)) or any(
                isinstance(i, bool) or not isinstance(i, int) for i in indices):
            raise UnmappableConfig(f"{what}: {self.indices_key} = {indices!r} must be a list of layer "
                                   f"indices (integers); cannot tell which layers attend")
        # (an index past the last layer names none, as in transformers' property)
        return ["full_attention" if i in indices else "linear_attention" for i in range(n)]


def _inner_dim(expand_key: str, inner_key: Optional[str] = None):
    """A step: ssm_inner_dim = the config's own inner width when the mixer reads one
    (MambaMixer: intermediate_size, FalconH1Mixer: mamba_d_ssm) and it is set, else
    int(expand * hidden_size) (Mamba2Mixer, BambaMixer)."""
    def step(src: Src, f: Fields, what: str) -> None:
        inner = src.opt_int(inner_key) if inner_key is not None else None
        if inner:
            f["ssm_inner_dim"] = inner
            return
        expand = src.get(expand_key)
        if expand is not None and f.get("hidden_dim"):
            f["ssm_inner_dim"] = int(expand * f["hidden_dim"])
    return step


def _heads_fit(heads_key: str, head_dim_key: str):
    """A step: Mamba-2 heads x head width must be the inner width, or the eager forward
    (which reshapes by both) cannot run: refuse such a config."""
    def step(src: Src, f: Fields, what: str) -> None:
        heads, width = src.opt_int(heads_key), src.get(head_dim_key, default=None)
        if heads and isinstance(width, int) and heads * width != f.get("ssm_inner_dim"):
            raise UnmappableConfig(f"{what}: {heads_key}={heads} x {head_dim_key}={width} != the mixer's "
                                   f"inner width {f.get('ssm_inner_dim')}; transformers cannot run it")
    return step


def _lfm2_ffn_width(src: Src, f: Fields, what: str) -> None:
    """Lfm2MLP: with block_auto_adjust_ff_dim the width is 2/3 of intermediate_size, times
    block_ffn_dim_multiplier, rounded up to block_multiple_of."""
    width = src.req_int("intermediate_size")
    if width is None or not src.get("block_auto_adjust_ff_dim", default=False):
        return
    width = int(2 * width / 3)
    multiplier = src.get("block_ffn_dim_multiplier", default=None)
    if multiplier is not None:
        width = int(multiplier * width)
        step = src.req_int("block_multiple_of") or 1
        width = step * ((width + step - 1) // step)
    f["ffn_embed_dim"] = width


def _jamba_experts(src: Src, f: Fields, what: str) -> None:
    """JambaDecoderLayer: experts (of intermediate_size) on layers i with
    i % expert_layer_period == expert_layer_offset."""
    experts, n = src.opt_int("num_experts", default=1), f.get("num_layers")
    if not experts or experts <= 1 or n is None:
        return
    period = src.req_int("expert_layer_period") or 1
    offset = src.opt_int("expert_layer_offset", default=0) or 0
    first, freq = moe_layout([i for i in range(n) if i % period == offset], n, what)
    f.update(moe_num_experts=experts, moe_top_k=src.req_int("num_experts_per_tok"), moe_first_dense_layers=first,
             moe_layer_freq=freq, moe_ffn_embed_dim=f.get("ffn_embed_dim"))


# NemotronHConfig's readings of the older spellings (its _pattern_to_list and transformers'
# remap_legacy_layer_types), for a raw config.json that transformers did not read (a field it
# refused, or transformers missing): then the family's own checks name the faulty field
_NEMOTRON_H_PATTERN = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}
_NEMOTRON_H_LEGACY = {"mamba": "linear_attention", "attention": "full_attention"}


def _nemotron_h_layers(src: Src, f: Fields, what: str) -> None:
    """NemotronHBlock: each layer is one block after one RMSNorm, by layers_block_type:
    a Mamba-2 mixer ("linear_attention"), attention ("full_attention"), a ReLU^2 MLP
    ("mlp") or experts ("moe"). MoE layers must be those of a "first k dense, then every
    n-th" layout on the layers that hold an MLP (the others do not care).

    Latent MoE (Nemotron-3 Super / Ultra, moe_latent_size set): NemotronHMoE projects the
    normed hidden state into moe_latent_size (fc1_latent_proj), runs the routed experts
    there (their up/down projections latent wide) and projects back (fc2_latent_proj); the
    router and the shared expert read the hidden state itself (ModelConfig.moe_latent_dim).
    Multi-token-prediction layers (num_nextn_predict_layers, mtp_layers_block_type) are not
    built by NemotronHForCausalLM (their checkpoint weights are skipped on load): not counted
    here either; `serve`'s speculative method "mtp" models drafting with one."""
    kinds = src.get("layers_block_type", "layer_types", default=None)
    pattern = src.get("hybrid_override_pattern", default=None)
    if kinds is None and isinstance(pattern, str):  # the raw config.json (transformers did not read it)
        kinds = [_NEMOTRON_H_PATTERN.get(c, c) for c in pattern]
    kinds = [_NEMOTRON_H_LEGACY.get(str(k), str(k)) for k in (kinds or [])]
    names = {"linear_attention": "mamba2", "full_attention": "full_attention", "mlp": "mlp", "moe": "mlp"}
    odd = sorted(set(kinds) - set(names))
    if odd or not kinds:
        raise UnsupportedArchitecture(f"{what}: layers_block_type {kinds[:8]} has kinds {odd or 'none'}; Mamba-2, "
                               "attention, MLP and MoE blocks are what ModelConfig describes")
    f.update(num_layers=len(kinds), layer_types=[names[k] for k in kinds])
    moe = [i for i, k in enumerate(kinds) if k == "moe"]
    if not moe:
        return
    dense = {i for i, k in enumerate(kinds) if k == "mlp"}
    for freq in range(1, len(kinds) + 1):
        hit = set(range(moe[0], len(kinds), freq))
        if hit >= set(moe) and not hit & dense:
            break
    else:
        raise UnsupportedArchitecture(f"{what}: MoE layers {moe} between dense ones {sorted(dense)} are not a "
                               "'first k dense, then every n-th' layout")
    f.update(moe_num_experts=src.req_int("n_routed_experts"), moe_top_k=src.req_int("num_experts_per_tok"),
             moe_first_dense_layers=moe[0], moe_layer_freq=freq,
             moe_ffn_embed_dim=src.req_int("moe_intermediate_size"), moe_num_shared_experts=1,
             moe_shared_expert_ffn_dim=src.req_int("moe_shared_expert_intermediate_size"),
             moe_latent_dim=src.opt_int("moe_latent_size"))


def _nemotron_h_inner(src: Src, f: Fields, what: str) -> None:
    """NemotronHMamba2Mixer: the inner width is mamba_num_heads x mamba_head_dim."""
    heads, width = src.req_int("mamba_num_heads"), src.req_int("mamba_head_dim")
    if heads and width:
        f["ssm_inner_dim"] = heads * width


# dtype names a config may give its recurrent state, and their bytes per element ("auto": the KV cache's)
_STATE_DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "float16": 2, "auto": None}


def _state_dtype(key: str, mamba_only: bool = False):
    """A step: the recurrent (SSM) state's dtype from `key`; the conv state stays in the KV cache's dtype.
    Nemotron-H's mamba_ssm_cache_dtype: vLLM keeps the SSM state in it (NemotronHForCausalLMConfig sets the
    engine's mamba_ssm_cache_dtype from it; `mamba_only`: only a model with Mamba layers has that state).
    Qwen3.5's mamba_ssm_dtype ("float32" in every Qwen3.5 config.json): SGLang and vLLM keep the Gated
    DeltaNet state in it (vLLM maps it onto mamba_ssm_cache_dtype; aiconfigurator's GDN collectors allocate
    it so). Absent (Qwen3-Next): the KV cache's dtype."""
    def step(src: Src, f: Fields, what: str) -> None:
        name = src.get(key, default=None)
        if name is None or (mamba_only and "mamba2" not in (f.get("layer_types") or ())):
            return
        if name not in _STATE_DTYPE_BYTES:
            raise UnsupportedArchitecture(f"{what}: {key} = {name!r} is not a state dtype llm-analysis "
                                          f"knows; valid: {sorted(_STATE_DTYPE_BYTES)}")
        f["ssm_state_dtype_bytes"] = _STATE_DTYPE_BYTES[name]
    return step


def _falcon_h1_biases(src: Src, f: Fields, what: str) -> None:
    """FalconH1Mixer: in_proj's bias is mamba_proj_bias, out_proj's projectors_bias."""
    a, b = bool(src.get("mamba_proj_bias", default=False)), bool(src.get("projectors_bias", default=False))
    if a != b:
        raise UnsupportedArchitecture(f"{what}: mamba_proj_bias={a} but projectors_bias={b} (different biases on the "
                               "mixer's in_proj and out_proj) is not described by ModelConfig")
    f["mixer_proj_bias"] = a


def _granite_hybrid_experts(src: Src, f: Fields, what: str) -> None:
    """GraniteMoeHybridDecoderLayer: without experts the layer's MLP is shared_mlp alone."""
    if not src.opt_int("num_local_experts", default=0):
        raise UnsupportedArchitecture(f"{what}: num_local_experts=0 (a shared MLP of shared_intermediate_size in "
                               "place of the experts) is not mapped")


# the per-layer kinds are read by MixerLayers (no sliding windows in these families)
_NO_WINDOW = {("sliding_window", "layer_types"): (None, None)}
# pure state-space models (MambaBlock: RMSNorm + mixer, no MLP), no positions, norm_f
_SSM = {
    "num_layers": Req("num_hidden_layers"), "hidden_dim": Req("hidden_size"), "vocab_size": Req("vocab_size"),
    "n_head": 1,  # no attention layer: one nominal head (never used)
    "layer_mlp": False, "num_norms_per_layer": 1, "norm_type": "rmsnorm", "norm_bias": False,
    "position_embedding_type": "none", "mlp_gated_linear_units": False,
    "ssm_state_size": Req("state_size"), "mixer_conv_kernel": Req("conv_kernel"),
    "mixer_conv_bias": Flag("use_conv_bias", default=True), "mixer_proj_bias": Flag("use_bias", default=False),
}
# Mamba (MambaMixer): d_inner = intermediate_size, dt rank time_step_rank; tied by default.
# FalconMamba adds RMS norms without weights on B, C and dt (no parameters, no FLOPs counted)
_MAMBA = Family({**_SSM, "ssm_dt_rank": Req("time_step_rank"),
                 "tie_word_embeddings": Flag("tie_word_embeddings", default=True)},
                steps=(_inner_dim("expand", "intermediate_size"), MixerLayers("mamba")))
# Mamba-2 (Mamba2Mixer): d_inner = expand x hidden, num_heads of head_dim, n_groups
_MAMBA2 = Family({**_SSM, "ssm_num_heads": Req("num_heads"), "ssm_num_groups": Req("n_groups"),
                  "ssm_chunk_size": Req("chunk_size"),
                  "tie_word_embeddings": Flag("tie_word_embeddings", default=False)},
                 steps=(_inner_dim("expand"), _heads_fit("num_heads", "head_dim"), MixerLayers("mamba2")))
# Bamba-style mixers (BambaMixer, GraniteMoeHybridMambaLayer): Mamba-2 under mamba_* keys
_MAMBA2_KEYS = {"ssm_state_size": Req("mamba_d_state"), "ssm_num_heads": Req("mamba_n_heads"),
                "ssm_num_groups": Req("mamba_n_groups"), "ssm_chunk_size": Req("mamba_chunk_size"),
                "mixer_conv_kernel": Req("mamba_d_conv"), "mixer_conv_bias": Flag("mamba_conv_bias", default=True),
                "mixer_proj_bias": Flag("mamba_proj_bias", default=False)}
_MAMBA2_KEY_STEPS = (_inner_dim("mamba_expand"), _heads_fit("mamba_n_heads", "mamba_d_head"),
                     MixerLayers("mamba2"))
# BambaConfig: attention on the layers attn_layer_indices lists (its layers_block_type property)
_BAMBA_STEPS = _MAMBA2_KEY_STEPS[:-1] + (MixerLayers("mamba2", indices_key="attn_layer_indices"),)

# Qwen3-Next / Qwen3.5 (Qwen3NextDecoderLayer): gated DeltaNet mixers (no conv bias) or
# gated attention (q_proj doubled for the output gate, q/k RMSNorm(head_dim)), per layer_types
_GDN_KEYS = {"gdn_num_key_heads": Req("linear_num_key_heads"), "gdn_num_value_heads": Req("linear_num_value_heads"),
             "gdn_key_head_dim": Req("linear_key_head_dim"), "gdn_value_head_dim": Req("linear_value_head_dim"),
             "mixer_conv_kernel": Req("linear_conv_kernel_dim"), "mixer_conv_bias": False}
_QWEN3_NEXT = {**QWEN3, **_NO_WINDOW, "attn_output_gate": "per_element", **_GDN_KEYS}
# Qwen3NextAttention: with attention_bias, q_proj (queries and the output gate) and o_proj
# carry biases the engine's gated attention does not describe
_NO_GATED_ATTN_BIAS = Refuse("attention_bias", (False,), default=False, as_bool=True, unsupported=True,
                             reason="biased projections of the output-gated attention")
# Qwen-MoE experts on decoder_sparse_step layers, a shared expert behind a sigmoid gate
_QWEN_NEXT_EXPERTS = MoeRule(experts=Opt("num_experts"), **QWEN_MOE_EXPERTS,
                             shared_width=Opt("shared_expert_intermediate_size"), shared_gate=True)
_GDN_LAYERS, _GDN_STATE_DTYPE = MixerLayers("gated_delta_net"), _state_dtype("mamba_ssm_dtype")

HYBRID_FAMILIES: Dict[str, Family] = {
    "mamba": _MAMBA,
    "falcon_mamba": _MAMBA,
    "mamba2": _MAMBA2,
    # Bamba (BambaDecoderLayer): input_layernorm, Mamba-2 mixer or Llama attention,
    # pre_ff_layernorm, gated MLP (mlp_bias)
    "bamba": Family({**LLAMA, **_NO_WINDOW, "mlp_bias": Flag("mlp_bias", default=False), **_MAMBA2_KEYS},
                    steps=_BAMBA_STEPS),
    # Jamba (JambaDecoderLayer): Mamba-1 mixers with RMSNorms on dt, B and C, attention
    # without positions on layer_types' full_attention layers, experts of intermediate_size
    # on every expert_layer_period-th layer from expert_layer_offset
    "jamba": Family(
        {**LLAMA, **_NO_WINDOW, "qkv_bias": False, "attn_out_bias": False, "position_embedding_type": "none",
         "ssm_state_size": Req("mamba_d_state"), "ssm_dt_rank": Req("mamba_dt_rank"),
         "ssm_dt_bc_norms": True, "mixer_conv_kernel": Req("mamba_d_conv"),
         "mixer_conv_bias": Flag("mamba_conv_bias", default=True),
         "mixer_proj_bias": Flag("mamba_proj_bias", default=False)},
        steps=(_inner_dim("mamba_expand"), MixerLayers("mamba"), _jamba_experts)),
    # LFM2 (Lfm2DecoderLayer): operator_norm, attention (q/k RMSNorm(head_dim), no biases)
    # or the gated short convolution (conv_bias on in_proj, conv and out_proj), ffn_norm,
    # SwiGLU MLP of the auto-adjusted width; the final norm is `embedding_norm`; tied
    "lfm2": Family(
        {**QWEN3, **_NO_WINDOW, "tie_word_embeddings": Flag("tie_word_embeddings", default=True),
         "mixer_conv_kernel": Req("conv_L_cache"), "mixer_conv_bias": Flag("conv_bias", default=False),
         "mixer_proj_bias": Flag("conv_bias", default=False)},
        steps=(_lfm2_ffn_width, MixerLayers("short_conv"))),
    # Granite-4 hybrid (GraniteMoeHybridDecoderLayer): Mamba-2 or attention, then experts of
    # intermediate_size and a gated shared MLP of shared_intermediate_size on every layer
    "granitemoehybrid": Family(
        {**LLAMA, **_NO_WINDOW, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": ATTENTION_BIAS, **_MAMBA2_KEYS},
        checks=(_granite_hybrid_experts,),
        steps=_MAMBA2_KEY_STEPS + (MoeRule(
            experts=Req("num_local_experts"), top_k=Req("num_experts_per_tok"), layers="all",
            width=Same("ffn_embed_dim"), shared_width=Opt("shared_intermediate_size")),)),
    # Falcon-H1 (FalconH1DecoderLayer): attention and a Mamba-2 mixer (inner width mamba_d_ssm,
    # else expand x hidden; gated RMSNorm when mamba_rms_norm) side by side on input_layernorm's
    # output, then pre_ff_layernorm and a gated MLP; the muP multipliers are constants
    "falcon_h1": Family(
        {**LLAMA, **_NO_WINDOW, "mlp_bias": Flag("mlp_bias", default=False), **_MAMBA2_KEYS,
         "ssm_gated_norm": Flag("mamba_rms_norm", default=False), "mixer_parallel_attention": True},
        steps=(_inner_dim("mamba_expand", "mamba_d_ssm"), _heads_fit("mamba_n_heads", "mamba_d_head"),
               _falcon_h1_biases, MixerLayers("mamba2", names=("hybrid",)))),
    # Nemotron-H (NemotronHBlock): one block per layer (_nemotron_h_layers); Mamba-2 mixers of
    # mamba_num_heads x mamba_head_dim with a gated RMSNorm; bias-free attention; non-gated
    # ReLU^2 MLPs (mlp_bias) and bias-free experts, one shared MLP of moe_shared_expert_intermediate_size;
    # the experts in a moe_latent_size latent space when set (Nemotron-3 Super / Ultra)
    "nemotron_h": Family(
        {**LLAMA, **_NO_WINDOW, "qkv_bias": False, "attn_out_bias": False, "mlp_gated_linear_units": False,
         "activation": Act("mlp_hidden_act", default="relu2"), "mlp_bias": Flag("mlp_bias", default=False),
         "num_layers": Opt("num_hidden_layers"), "layer_mlp": False, "num_norms_per_layer": 1,
         "position_embedding_type": "none", "ssm_state_size": Req("ssm_state_size"),
         "ssm_num_heads": Req("mamba_num_heads"), "ssm_num_groups": Req("n_groups"),
         "ssm_chunk_size": Req("chunk_size"),
         "mixer_conv_kernel": Req("conv_kernel"), "mixer_conv_bias": Flag("use_conv_bias", default=True),
         "mixer_proj_bias": Flag("use_bias", default=False)},
        steps=(_nemotron_h_layers, _nemotron_h_inner, _state_dtype("mamba_ssm_cache_dtype", mamba_only=True))),
    # OLMo hybrid (OlmoHybridDecoderLayer): gated DeltaNet layers (q/k/v/g/a/b as separate
    # bias-free projections, the same shapes as the merged ones; conv without bias) and
    # OLMo-2-style attention (q/k RMSNorm over all heads, norms after attention and MLP)
    "olmo_hybrid": Family(
        {**LLAMA, **_NO_WINDOW, "qk_norm": True, "qk_norm_per_head": True,
         **_GDN_KEYS},
        steps=(MixerLayers("gated_delta_net"),)),
    # Kimi Linear (KimiLinearDecoderLayer): KDA mixers of linear_num_heads x linear_head_dim (gate
    # rank linear_head_dim, no conv bias) or DeepSeek's MLA; DeepSeek-style experts per
    # mlp_layer_types with num_shared_experts x moe_intermediate_size shared
    "kimi_linear": Family(
        {**LLAMA, **_NO_WINDOW, "num_key_value_heads": Same("n_head"), "q_lora_rank": Opt("q_lora_rank"),
         "kv_lora_rank": Req("kv_lora_rank"), "qk_nope_head_dim": Req("qk_nope_head_dim"),
         "qk_rope_head_dim": Req("qk_rope_head_dim"), "v_head_dim": Req("v_head_dim"),
         "head_dim": Sum("qk_nope_head_dim", "qk_rope_head_dim"),
         "gdn_num_key_heads": Req("linear_num_heads"), "gdn_num_value_heads": Req("linear_num_heads"),
         "gdn_key_head_dim": Req("linear_head_dim"), "gdn_value_head_dim": Req("linear_head_dim"),
         "kda_gate_rank": Req("linear_head_dim"), "mixer_conv_kernel": Req("linear_conv_kernel_dim"),
         "mixer_conv_bias": False,
         # KimiLinearForCausalLM declares no tied weights: tie_word_embeddings is ignored
         "tie_word_embeddings": False},
        steps=(MixerLayers("kda"), MoeRule(
            experts=Opt("num_experts"), top_k=Req("num_experts_per_token", "num_experts_per_tok"), top_k_first=False,
            layers="listed", width=Req("moe_intermediate_size"), shared_count=Opt("num_shared_experts", default=0),
            shared_width=Same("moe_ffn_embed_dim")))),
    "qwen3_next": Family(_QWEN3_NEXT, checks=(_NO_GATED_ATTN_BIAS,), steps=(_GDN_LAYERS, _QWEN_NEXT_EXPERTS,
                                                                              _GDN_STATE_DTYPE)),
    # Qwen3.5 (Qwen3_5GatedDeltaNet): the same mixer with in_proj_qkv / in_proj_z / in_proj_a /
    # in_proj_b as separate matmuls (the same parameters and FLOPs as the merged two)
    "qwen3_5_text": Family(_QWEN3_NEXT, checks=(_NO_GATED_ATTN_BIAS,), steps=(_GDN_LAYERS, _GDN_STATE_DTYPE)),
    # Qwen3.5-MoE: experts (and the gated shared expert) on every layer, no dense width
    "qwen3_5_moe_text": Family({**_QWEN3_NEXT, "ffn_embed_dim": Req("moe_intermediate_size")},
                               checks=(_NO_GATED_ATTN_BIAS,),
                               steps=(_GDN_LAYERS, _QWEN_NEXT_EXPERTS, _GDN_STATE_DTYPE)),
}
