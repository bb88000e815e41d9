"""`VisionTower`: the vision encoder and projector a vision-language model holds beside its
language model (`ModelConfig.vision_tower`; operators in model/vision_tower.py).

A vision tower is a ViT: a patch embedding (a linear map, or a convolution with stride =
kernel, of each patch's pixels: channels x temporal frames x patch height x width inputs),
a learned position table, `num_layers` blocks of bidirectional attention and an MLP, and
a projector that merges neighbouring patches into one image token of the language model
and maps it to the decoder's width (Qwen-VL's 2 x 2 spatial merge concatenates four
patches; Gemma's pooling averages them). The projector is described as data: its
linear layers and norms in order, each on image tokens or on patches, so one description
serves Qwen3-VL / Qwen3.5 (merger + deepstack mergers), Gemma 4 (one projection) and
Llama 4 (pixel-shuffle MLP + projector).

Kept out of `schema/model.py` so that module stays about the language model's shapes;
raises ValueError, which `StrictModel` turns into the package's ConfigError naming field
and value.
"""

from __future__ import annotations

from typing import List, Literal, Optional

from pydantic import model_validator

from llm_analysis.schema.base import StrictModel

__all__ = ["VisionTower", "ProjectorLayer"]


class ProjectorLayer(StrictModel):
    """One layer of the projector from the vision tower to the decoder: a linear map
    `d_in` -> `d_out` or a norm over `d_in` (LayerNorm with a bias, RMSNorm without;
    `affine` False: no weights), on each image token or, `per_patch`, on each patch
    before the merge. `copies`: identical layers run on the same tokens (Qwen3-VL's
    deepstack mergers feed three decoder layers)."""

    kind: Literal["linear", "norm"]
    d_in: int
    d_out: Optional[int] = None  # linear only
    bias: bool = False
    affine: bool = True  # norms only
    per_patch: bool = False
    copies: int = 1

    @model_validator(mode="after")
    def _check(self) -> "ProjectorLayer":
        self._positive("d_in", "d_out", "copies")
        if self.kind == "linear" and self.d_out is None:
            raise ValueError("field 'projector[].d_out' must be set for a linear layer (its output width)")
        return self

    @property
    def params(self) -> int:
        if self.kind == "linear":
            return (self.d_in * self.d_out + (self.d_out if self.bias else 0)) * self.copies
        return (self.d_in * (2 if self.bias else 1) if self.affine else 0) * self.copies


class VisionTower(StrictModel):
    """Shapes of a ViT vision encoder and its projector (see the module docstring).

    `patches_per_token`: patches merged into one image token of the language model
    (Qwen-VL: spatial_merge_size^2 = 4); None when the family's rule from image tokens
    to patches is not described, and then an image input is refused (the weights still
    count). `class_tokens`: learned hidden-wide vectors prepended per image (Llama 4).
    `tokens_per_image`: the image tokens of every image when the family resizes each image to
    one size (Gemma 3's SigLIP: 256); a request's image tokens are then a whole number of such
    images, each attending within its own patches."""

    num_layers: int
    hidden_dim: int
    n_head: int
    head_dim: Optional[int] = None  # default hidden_dim // n_head
    ffn_embed_dim: int
    mlp_gated_linear_units: bool = False
    qkv_bias: bool = True
    attn_out_bias: bool = True
    mlp_bias: bool = True
    qk_norm: bool = False  # per-head RMSNorms on q and k (head_dim weights each)
    norm_bias: bool = True  # block norms: LayerNorm with bias (True) or RMSNorm (False)
    num_norms_per_layer: int = 2  # 4: sandwich norms around attention and MLP (Gemma 4)
    patch_input_dim: int  # pixels of one patch: channels x temporal frames x patch_size^2
    patch_embedding_bias: bool = True
    position_embeddings: int = 0  # rows of the learned position table (hidden_dim wide)
    class_tokens: int = 0
    outer_norms: int = 0  # hidden-wide norms before / after the blocks (Llama 4: 2)
    patches_per_token: Optional[int] = None
    # image tokens of one image when every image has the same size (Gemma 3: each image or crop resized to
    # image_size, pooled to mm_tokens_per_image tokens); None: one image per request of any size (Qwen-VL)
    tokens_per_image: Optional[int] = None
    projector: List[ProjectorLayer] = []
    activation: str = "gelu"

    @model_validator(mode="after")
    def _check(self) -> "VisionTower":
        self._positive("num_layers", "hidden_dim", "n_head", "head_dim", "ffn_embed_dim", "patch_input_dim",
                       "num_norms_per_layer", "patches_per_token", "tokens_per_image")
        self._positive("position_embeddings", "class_tokens", "outer_norms", lo_open=False)
        if self.head_dim is None:
            if self.hidden_dim % self.n_head:
                raise ValueError(f"field 'vision_tower.hidden_dim' = {self.hidden_dim} is not divisible by "
                                 f"vision_tower.n_head = {self.n_head}; give vision_tower.head_dim")
            self.head_dim = self.hidden_dim // self.n_head
        return self
