"""The vision tower of a vision-language config: its `VisionTower` fields (schema/vision_tower.py), read
from the wrapper config's `vision_config` as transformers fills it in, by a row per wrapper `model_type`
(the wrapper's class decides the projector). Each row follows the transformers 5.23 modelling code of the
class a user loads:
- Qwen3-VL / Qwen3.5 (`Qwen3VLVisionModel`, `Qwen3_5VisionModel`): a Conv3d patch embedding over
  in_channels x temporal_patch_size x patch_size^2 pixels, LayerNorm blocks with biases everywhere, then the
  patch merger (per-patch LayerNorm, fc1 over the spatial_merge_size^2 patches concatenated, GELU, fc2 to
  out_hidden_size), one more merger per `deepstack_visual_indexes` entry (its norm after the merge). An
  image token is spatial_merge_size^2 patches.
- Gemma 3 (`SiglipVisionModel`, `Gemma3MultiModalProjector`): a SigLIP encoder with a learned position per
  patch and a final LayerNorm; the projector average-pools the patches to mm_tokens_per_image tokens, then an
  RMSNorm and one bias-free linear map. Every image (or pan-and-scan crop) is resized to image_size.
- Gemma 4 (`Gemma4VisionModel`, `Gemma4MultimodalEmbedder`): a bias-free linear patch embedding, a 2-D
  position table (2 x position_embedding_size rows), RMSNorm sandwich blocks (4 norms) with per-head q/k
  RMSNorms and a gated MLP; the projector one bias-free linear map after a weightless norm. An image token
  averages pooling_kernel_size^2 patches.
- Kimi-K2.5 (`Kimi_K25VisionModel`, `Kimi_K25MultimodalProjection`; transformers' own class, built without
  remote code): Qwen-VL-like blocks on a pos_emb_height x pos_emb_width position grid, a final LayerNorm;
  the projector a per-patch LayerNorm, in_proj over the merge_kernel_size patches concatenated, GELU,
  out_proj. An image token is merge_kernel_size[0] x merge_kernel_size[1] patches.
- Llama 4 (`Llama4VisionModel`, `Llama4MultiModalProjector`): a bias-free linear patch embedding, one class
  embedding, LayerNorms before and after the blocks; the projector the pixel-shuffle MLP and linear_1. Its
  image work is not described (the class token, tiles and the pixel shuffle decide the patches per image
  token): weights counted, an image input refused.

A wrapper type without a row keeps the refusal of hub/model_class.py (`towers_refusal`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from llm_analysis.hub.errors import UnmappableConfig

__all__ = ["VISION_TOWER_ROWS", "read_vision_tower"]


def _int(v: Any, key: str, what: str) -> int:
    value = getattr(v, key, None)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnmappableConfig(f"Cannot map the vision tower of {what}: vision_config.{key} = {value!r} "
                               "must be a whole number (the tower's shape needs it)")
    return value


def _text_hidden(wrapper: Any, what: str) -> int:
    return _int(wrapper.get_text_config(), "hidden_size", what)


def _qwen_row(v: Any, what: str, wrapper: Any) -> Dict[str, Any]:
    h = _int(v, "hidden_size", what)
    merge = _int(v, "spatial_merge_size", what)
    merged = h * merge * merge
    out = _int(v, "out_hidden_size", what)
    merger = [{"kind": "linear", "d_in": merged, "d_out": merged, "bias": True},
              {"kind": "linear", "d_in": merged, "d_out": out, "bias": True}]
    deepstack = len(getattr(v, "deepstack_visual_indexes", None) or [])
    projector = [{"kind": "norm", "d_in": h, "bias": True, "per_patch": True}] + merger
    if deepstack:
        projector += [{"kind": "norm", "d_in": merged, "bias": True, "copies": deepstack}]
        projector += [{**layer, "copies": deepstack} for layer in merger]
    return {
        "num_layers": _int(v, "depth", what), "hidden_dim": h, "n_head": _int(v, "num_heads", what),
        "ffn_embed_dim": _int(v, "intermediate_size", what),
        "patch_input_dim": _int(v, "in_channels", what) * _int(v, "temporal_patch_size", what)
        * _int(v, "patch_size", what) ** 2,
        "position_embeddings": _int(v, "num_position_embeddings", what),
        "patches_per_token": merge * merge, "projector": projector,
    }


def _gemma4_row(v: Any, what: str, wrapper: Any) -> Dict[str, Any]:
    h = _int(v, "hidden_size", what)
    pool = _int(v, "pooling_kernel_size", what)
    if getattr(v, "use_clipped_linears", False):
        raise UnmappableConfig(f"Cannot map the vision tower of {what}: vision_config.use_clipped_linears = True "
                               "(clipping bounds beside each linear layer) is not described; set it False or use "
                               "the exact path")
    return {
        "num_layers": _int(v, "num_hidden_layers", what), "hidden_dim": h,
        "n_head": _int(v, "num_attention_heads", what), "head_dim": _int(v, "head_dim", what),
        "ffn_embed_dim": _int(v, "intermediate_size", what), "mlp_gated_linear_units": True,
        "qkv_bias": bool(getattr(v, "attention_bias", False)),
        "attn_out_bias": bool(getattr(v, "attention_bias", False)),
        "mlp_bias": False, "qk_norm": True, "norm_bias": False, "num_norms_per_layer": 4,
        "patch_input_dim": 3 * _int(v, "patch_size", what) ** 2, "patch_embedding_bias": False,
        "position_embeddings": 2 * _int(v, "position_embedding_size", what),
        "patches_per_token": pool * pool,
        "projector": [{"kind": "norm", "d_in": h, "affine": False},
                      {"kind": "linear", "d_in": h, "d_out": _text_hidden(wrapper, what)}],
    }


def _gemma3_row(v: Any, what: str, wrapper: Any) -> Dict[str, Any]:
    if getattr(v, "vision_use_head", False):
        raise UnmappableConfig(f"Cannot map the vision tower of {what}: vision_config.vision_use_head = True "
                               "(SigLIP's attention-pooling head) is not part of Gemma 3's tower; set it False")
    h, patch = _int(v, "hidden_size", what), _int(v, "patch_size", what)
    patches = (_int(v, "image_size", what) // patch) ** 2
    tokens = _int(wrapper, "mm_tokens_per_image", what)
    if patches % tokens:
        raise UnmappableConfig(f"Cannot map the vision tower of {what}: mm_tokens_per_image = {tokens} does not "
                               f"divide the {patches} patches of an image")
    return {
        "num_layers": _int(v, "num_hidden_layers", what), "hidden_dim": h,
        "n_head": _int(v, "num_attention_heads", what), "ffn_embed_dim": _int(v, "intermediate_size", what),
        "patch_input_dim": _int(v, "num_channels", what) * patch * patch, "position_embeddings": patches,
        "outer_norms": 1, "patches_per_token": patches // tokens, "tokens_per_image": tokens,
        "activation": "gelu_tanh",
        "projector": [{"kind": "norm", "d_in": h},
                      {"kind": "linear", "d_in": h, "d_out": _text_hidden(wrapper, what)}],
    }


def _kimi_k25_row(v: Any, what: str, wrapper: Any) -> Dict[str, Any]:
    h = _int(v, "hidden_size", what)
    kernel = getattr(v, "merge_kernel_size", None)
    if not (isinstance(kernel, (list, tuple)) and len(kernel) == 2 and all(isinstance(k, int) for k in kernel)):
        raise UnmappableConfig(f"Cannot map the vision tower of {what}: vision_config.merge_kernel_size = {kernel!r} "
                               "must be two whole numbers (patches merged per image token, height and width)")
    merge = kernel[0] * kernel[1]
    norm_width = _int(wrapper, "projection_hidden_size", what)
    return {
        "num_layers": _int(v, "num_hidden_layers", what), "hidden_dim": h,
        "n_head": _int(v, "num_attention_heads", what), "ffn_embed_dim": _int(v, "intermediate_size", what),
        "patch_input_dim": 3 * _int(v, "patch_size", what) ** 2,
        "position_embeddings": _int(v, "pos_emb_height", what) * _int(v, "pos_emb_width", what),
        "outer_norms": 1, "patches_per_token": merge,
        "projector": [{"kind": "norm", "d_in": norm_width, "bias": True, "per_patch": True},
                      {"kind": "linear", "d_in": h * merge, "d_out": h * merge, "bias": True},
                      {"kind": "linear", "d_in": h * merge,
                       "d_out": _text_hidden(wrapper, what), "bias": True}],
    }


def _llama4_row(v: Any, what: str, wrapper: Any) -> Dict[str, Any]:
    patch = _int(v, "patch_size", what)
    grid = _int(v, "image_size", what) // patch
    return {
        "num_layers": _int(v, "num_hidden_layers", what), "hidden_dim": _int(v, "hidden_size", what),
        "n_head": _int(v, "num_attention_heads", what), "ffn_embed_dim": _int(v, "intermediate_size", what),
        "patch_input_dim": _int(v, "num_channels", what) * patch * patch, "patch_embedding_bias": False,
        "position_embeddings": grid * grid + 1, "class_tokens": 1, "outer_norms": 2,
        "projector": [{"kind": "linear", "d_in": _int(v, "intermediate_size", what),
                       "d_out": _int(v, "projector_input_dim", what)},
                      {"kind": "linear", "d_in": _int(v, "projector_output_dim", what),
                       "d_out": _int(v, "projector_output_dim", what)},
                      {"kind": "linear", "d_in": _int(v, "vision_output_dim", what),
                       "d_out": _text_hidden(wrapper, what),
                       "bias": bool(getattr(v, "multi_modal_projector_bias", False))}],
    }


#: wrapper model_type -> reader(vision_config, what, wrapper config) -> VisionTower fields
VISION_TOWER_ROWS: Dict[str, Callable[[Any, str, Any], Dict[str, Any]]] = {
    "qwen3_vl": _qwen_row,
    "qwen3_vl_moe": _qwen_row,
    "qwen3_5": _qwen_row,
    "qwen3_5_moe": _qwen_row,
    "gemma3": _gemma3_row,
    "gemma4": _gemma4_row,
    "kimi_k25": _kimi_k25_row,
    "llama4": _llama4_row,
}


def read_vision_tower(wrapper: Any, what: str) -> Optional[Dict[str, Any]]:
    """The VisionTower fields of transformers config object `wrapper`, or None when its
    model_type has no row (the caller refuses it)."""
    row = VISION_TOWER_ROWS.get(getattr(wrapper, "model_type", None))
    vision = getattr(wrapper, "vision_config", None)
    if row is None or vision is None:
        return None
    return row(vision, what, wrapper)
