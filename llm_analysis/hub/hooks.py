"""Named hooks of the Hub family table: the architecture details that are not "read a key into a field",
each citing the transformers modelling code it follows. A hook is a step `(src, fields, what) -> None`
editing the fields, or a `Reader`. Raw-dict hooks (`src.obj is None`) redo what the transformers config
class would have derived when the library cannot build it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llm_analysis.hub.errors import UnmappableConfig
from llm_analysis.hub.source import Fields, Src, attention_layout
from llm_analysis.hub.spec import Reader

__all__ = ["GptNeoWindow", "RawWindowPattern", "qwen_window", "falcon_decoder_architecture",
           "opt_projection_and_final_norm", "mpt_attention"]

FULL, SLIDE = "full_attention", "sliding_attention"


class GptNeoWindow(Reader):
    """(sliding_window, layer_types) of GPT-Neo: `attention_layers` lists "global"/"local"
    per layer, or `attention_types` gives [[pattern, repeat], ...] (GPTNeoConfig)."""

    def read(self, src: Src, f: Fields, what: str):
        layers = src.get("attention_layers", default=None)
        if layers is None and src.has("attention_types"):
            layers = []
            for pattern, repeat in src.get("attention_types"):
                layers.extend(list(pattern) * int(repeat))
        if layers is None:
            src.missing.append("attention_types")
            layer_types = None
        else:
            layer_types = [SLIDE if t == "local" else FULL for t in layers]
        return attention_layout(layer_types, src.get("window_size", default=256),
                                f.get("num_layers"), what)


@dataclass(frozen=True)
class RawWindowPattern:
    """Raw-dict path of configs whose class derives layer_types from a period: every
    `period`-th layer (1-based) is full attention, the others slide (Gemma 2: 2;
    Gemma 3: `sliding_window_pattern`, default 6; gpt-oss: 2)."""
    period: int = 2
    period_key: Optional[str] = None
    default_window: int = 4096

    def __call__(self, src: Src, f: Fields, what: str) -> None:
        n = f["num_layers"]
        if src.obj is not None or src.has("layer_types") or not n:
            return
        period = self.period
        if self.period_key:
            period = src.opt_int(self.period_key, default=self.period) or self.period
        f["sliding_window"], f["layer_types"] = attention_layout(
            [SLIDE if (i + 1) % period else FULL for i in range(n)],
            src.get("sliding_window", default=self.default_window), n, what)


def qwen_window(src: Src, f: Fields, what: str) -> None:
    """Qwen2/3 configs carry sliding_window even when use_sliding_window is false; on the
    raw-dict path transformers did not clear it, so do it here (layers from
    `max_window_layers` on slide, as Qwen2Config derives them)."""
    if src.obj is not None:
        return
    if not bool(src.raw.get("use_sliding_window", False)):
        f["sliding_window"], f["layer_types"] = None, None
        return
    n = f["num_layers"]
    mwl = int(src.raw.get("max_window_layers", 28))
    lt = [SLIDE if i >= mwl else FULL for i in range(n or 0)]
    f["sliding_window"], f["layer_types"] = attention_layout(lt, src.raw.get("sliding_window"), n, what)


def falcon_decoder_architecture(src: Src, f: Fields, what: str) -> None:
    """Falcon's KV heads and norms (FalconAttention / FalconDecoderLayer): the new decoder
    architecture (40B/180B) has `num_kv_heads` groups and two norms (ln_attn, ln_mlp)
    unless num_ln_in_parallel_attn says 1; the old one is multi-query (one KV head) or
    MHA with one shared input norm when parallel, two when sequential."""
    heads = f["n_head"]
    new_arch = bool(src.get("new_decoder_architecture", default=False))
    multi_query = bool(src.get("multi_query", default=True))
    parallel = bool(src.get("parallel_attn", default=True))
    if new_arch:
        kv = src.opt_int("num_kv_heads", default=None) or heads
    elif multi_query:
        kv = 1
    else:
        kv = heads
    # FalconDecoderLayer's default for the new decoder architecture: 2
    num_ln = src.opt_int("num_ln_in_parallel_attn", default=2 if new_arch else None)
    # sequential: input_layernorm + post_attention_layernorm; parallel: ln_attn + ln_mlp, or one shared norm
    norms = 2 if not parallel or num_ln == 2 else 1
    f.update(num_key_value_heads=kv, parallel_attn_mlp=parallel or new_arch,
             num_norms_per_layer=norms)


def opt_projection_and_final_norm(src: Src, f: Fields, what: str) -> None:
    """OPT: word embeddings narrower than hidden (`word_embed_proj_dim`, OPT-350m) get
    project_in/project_out; post-LN variants (`do_layer_norm_before=False`) and
    `_remove_final_layer_norm` have no final norm (OPTDecoder)."""
    proj = src.opt_int("word_embed_proj_dim", default=None)
    pre_ln = bool(src.get("do_layer_norm_before", default=True))
    removed = bool(src.get("_remove_final_layer_norm", default=False))
    h = f["hidden_dim"]
    f.update(embedding_dim=proj if proj and proj != h else None, final_norm=pre_ln and not removed)


def mpt_attention(src: Src, f: Fields, what: str) -> None:
    """MPT's `attn_config` (a dict, or MptAttentionConfig): the row describes ALiBi
    attention without q/k LayerNorms (MptAttention); anything else is refused."""
    cfg = src.get("attn_config", default={}) or {}
    get = cfg.get if isinstance(cfg, dict) else (lambda k, d=None: getattr(cfg, k, d))
    alibi, qk_ln = get("alibi", False), get("qk_ln", False)
    if not alibi or qk_ln:
        raise UnmappableConfig(f"{what}: MPT attn_config alibi={alibi!r}, qk_ln={qk_ln!r}; only "
                               "ALiBi attention without q/k LayerNorms is described")
