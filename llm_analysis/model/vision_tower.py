"""Operators of a vision-language model's vision tower and projector
(`ModelConfig.vision_tower`, schema/vision_tower.py), on the first pipeline stage.

What is counted always: their parameters and weight memory (a user loading the model
for generation puts them on the GPU). What runs: only a prefill that names image tokens
(`LayerDescriber.with_image_tokens`, `inference(image_tokens=N)`, `--image_tokens N`);
every other phase (text-only prefill, decode steps, training) lists the operators with
no work, so they cost no time.

Image work, per request of a prefill with `image_tokens` = N (`phase.batch` requests):
- one image per request, its N image tokens made of P = N x `patches_per_token` patches
  (Qwen-VL's 2 x 2 spatial merge: P = 4N); where the family resizes every image to one size
  (`tokens_per_image`, Gemma 3: 256 tokens of 4,096 patches), N / tokens_per_image images;
- the patch embedding, each block's q/k/v/o projections and MLP on P patches, the
  attention core over the image's own patches (bidirectional: P^2 score pairs per head,
  as eager attention computes within each image);
- the projector's layers on the N image tokens (or on the P patches, `per_patch`).
  A family whose rule from image tokens to patches is not described
  (`patches_per_token` None) refuses an image input.
The image tokens are part of the prompt: the decoder's prefill is timed on the whole
prompt as before (placeholders replaced by the projector's outputs).

Sharding (an assumption, as vLLM's default `mm_encoder_tp_mode="weights"` shards
Qwen-VL's and Llama 4's vision encoders): the blocks' projections and MLP and the
projector's linear layers are split over tensor-parallel ranks (heads and columns), the
patch embedding, position table and norms replicated on every rank. Where tp_size does
not divide the tower's heads and widths the whole tower is replicated (vLLM's
`mm_encoder_tp_mode="data"`). Pipeline parallel: the tower lives on the first stage.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.errors import ConfigError
from llm_analysis.model.records import Operator, Phase
from llm_analysis.schema.vision_tower import VisionTower

__all__ = ["VISION_GROUP", "PROJECTOR_GROUP", "check_image_prompt", "check_image_tokens", "vision_parts", "vision_shard"]

VISION_GROUP = "vision tower"
PROJECTOR_GROUP = "projector"


def check_image_tokens(model, image_tokens: Optional[int]) -> Optional[int]:
    """`image_tokens` validated for `model` (None: no image input)."""
    if image_tokens is None:
        return None
    if isinstance(image_tokens, bool) or not isinstance(image_tokens, int) or image_tokens < 0:
        raise ConfigError(f"image_tokens = {image_tokens!r} must be a whole number >= 0 (the image tokens of "
                          "each request's prompt)")
    if image_tokens == 0:
        return None
    v = model.vision_tower
    if v is None:
        raise ConfigError(f"image_tokens = {image_tokens} but {model.name} has no vision tower (a text-only "
                          "model); drop image_tokens")
    if v.tokens_per_image and image_tokens % v.tokens_per_image:
        raise ConfigError(f"image_tokens = {image_tokens}: {model.name} resizes every image (or crop) to one size of "
                          f"{v.tokens_per_image} image tokens, so a request's image tokens are a multiple of "
                          f"{v.tokens_per_image}; valid: {v.tokens_per_image}, {2 * v.tokens_per_image}, ...")
    if v.patches_per_token is None:
        raise ConfigError(
            f"image_tokens = {image_tokens}: {model.name}'s vision tower is counted (parameters, weight memory) "
            "but how many patches its encoder runs for an image token is not described for this family "
            "(vision_tower.patches_per_token unset), so an image input's work cannot be timed; drop "
            "image_tokens to time the text-only request")
    return image_tokens


def check_image_prompt(image_tokens: Optional[int], seq_len: Any) -> Optional[int]:
    """`image_tokens` unchanged when it fits in a prompt of `seq_len` tokens (the image tokens
    are prompt tokens); ConfigError otherwise (the model's checks follow in check_image_tokens)."""
    if isinstance(image_tokens, int) and not isinstance(image_tokens, bool) and isinstance(seq_len, int) \
            and image_tokens > seq_len:
        raise ConfigError(f"image_tokens = {image_tokens} exceeds seq_len = {seq_len}: the image tokens are part of "
                          f"the prompt; give seq_len >= {image_tokens} (image plus text tokens)")
    return image_tokens


def with_request_images(analysis, image_tokens: Optional[int], seq_len: Any):
    """The analysis an inference() request times: with its `image_tokens` (None: the analysis' own,
    set by `with_image_tokens`, if any), checked to fit in its `seq_len`-token prompt."""
    a = analysis if image_tokens is None else analysis.with_image_tokens(image_tokens)
    check_image_prompt(a.image_tokens, seq_len)
    return a


def image_entries(analysis) -> Dict[str, int]:
    """The summary's `image_tokens` entry when the request has an image input (else none)."""
    return {"image_tokens": analysis.image_tokens} if analysis.image_tokens else {}


def image_variant(analysis, image_tokens: Optional[int], make):
    """`analysis` with `image_tokens` (validated; None or 0: no image input): itself when unchanged,
    else `make(image_tokens=n)`."""
    n = check_image_tokens(analysis.model_config, image_tokens)
    return analysis if n == analysis.image_tokens else make(image_tokens=n)


def vision_shard(v: VisionTower, tp: int) -> int:
    """The tensor-parallel split of the tower's matmuls: tp when it divides the heads and
    every sharded width, else 1 (replicated; see the module docstring)."""
    widths = [v.n_head, v.ffn_embed_dim] + [p.d_out for p in v.projector if p.kind == "linear"]
    return tp if all(w % tp == 0 for w in widths) else 1


class _Builder:
    """Builds one part's operators for a describer `d` and phase: work on `tokens` rows
    when the phase runs the image, weights only otherwise."""

    def __init__(self, d, phase: Phase, image_tokens: Optional[int]):
        self.d, self.v = d, d.model.vision_tower
        runs = image_tokens is not None and phase.name == "prefill" and phase.past_len == 0 and not phase.shapes_only
        # one image per request, or, where every image has one size, as many as its image tokens make
        per_request = image_tokens // self.v.tokens_per_image if runs and self.v.tokens_per_image else 1
        self.images = phase.batch * per_request if runs else 0
        self.image_tokens = phase.batch * image_tokens if runs else 0
        self.patches = self.image_tokens * (self.v.patches_per_token or 0)
        self.shard = vision_shard(self.v, d.tp)

    def matmul(self, name: str, group: str, rows: int, d_in: int, d_out: int, bias: bool, shard: int,
               copies: int = 1) -> Operator:
        op = self.d.matmul_op(name, group, Phase("prefill", 1, max(rows, 1), max(rows, 1)), max(rows, 1),
                              d_in, d_out, bias, shard=shard, shard_input=False, copies=copies)
        return op if rows else _idle(op)

    def norm(self, name: str, group: str, rows: int, width: int, bias: bool, affine: bool = True,
             copies: int = 1) -> Operator:
        params = width * (2 if bias else 1) * copies if affine else 0
        elems = rows * width * copies
        a, w = self.d.a_bytes, self.d.w_bytes
        return Operator(name=name, group=group, kind="norm", params=params, params_per_gpu=params,
                        weight_bytes_per_gpu=params * w,
                        bytes_read_per_gpu=(elems * a + params * w) if rows else 0.0,
                        bytes_written_per_gpu=elems * a, shapes=f"[{width}] x {rows}")

    def table(self, name: str, rows_held: int, width: int, rows_read: int) -> Operator:
        n = rows_held * width
        e, a = self.d.e_bytes, self.d.a_bytes
        return Operator(name=name, group=VISION_GROUP, kind="embedding", params=n, params_per_gpu=n,
                        weight_bytes_per_gpu=n * e, bytes_read_per_gpu=rows_read * width * e,
                        bytes_written_per_gpu=rows_read * width * a, shapes=f"[{rows_held}x{width}] x {rows_read}")


def _idle(op: Operator) -> Operator:
    """The operator holding its weights and doing no work (no image in this phase)."""
    op.flops = op.flops_per_gpu = 0.0
    op.bytes_read_per_gpu = op.bytes_written_per_gpu = 0.0
    op.kernel_dims = ()
    op.shapes = op.shapes.split(" x ")[0] + " (no image)"
    return op


def embedding_ops(b: _Builder) -> List[Operator]:
    v, p = b.v, b.patches
    ops = [b.matmul("patch_embedding", VISION_GROUP, p, v.patch_input_dim, v.hidden_dim, v.patch_embedding_bias, 1)]
    if v.position_embeddings:
        ops.append(b.table("vision_position_embedding", v.position_embeddings, v.hidden_dim, p))
    if v.class_tokens:
        ops.append(b.table("class_embedding", v.class_tokens, v.hidden_dim, b.images * v.class_tokens))
    ops += [b.norm(f"vision_outer_norm_{i + 1}", VISION_GROUP, p, v.hidden_dim, v.norm_bias)
            for i in range(v.outer_norms)]
    return ops


def block_ops(b: _Builder) -> List[Operator]:
    """One encoder block (repeated num_layers times)."""
    v, p, s = b.v, b.patches, b.shard
    inner = v.n_head * v.head_dim
    ops = [b.norm(f"vision_norm_{i + 1}", VISION_GROUP, p, v.hidden_dim, v.norm_bias)
           for i in range(v.num_norms_per_layer)]
    ops.append(b.matmul("vision_qkv", VISION_GROUP, p, v.hidden_dim, 3 * inner, v.qkv_bias, s))
    if v.qk_norm:
        ops.append(b.norm("vision_qk_norm", VISION_GROUP, p * v.n_head, v.head_dim, False, copies=2))
    ops.append(_attention_core(b))
    ops.append(b.matmul("vision_attn_out", VISION_GROUP, p, inner, v.hidden_dim, v.attn_out_bias, s))
    up = 2 if v.mlp_gated_linear_units else 1
    ops.append(b.matmul("vision_mlp_up", VISION_GROUP, p, v.hidden_dim, v.ffn_embed_dim, v.mlp_bias, s, copies=up))
    ops.append(b.matmul("vision_mlp_down", VISION_GROUP, p, v.ffn_embed_dim, v.hidden_dim, v.mlp_bias, s))
    return ops


def _attention_core(b: _Builder) -> Operator:
    """Scores and weighted values within each image: P_image^2 pairs per head and image."""
    v = b.v
    per_image = b.patches // b.images if b.images else 0
    pairs = b.images * per_image * per_image
    flops = 4.0 * pairs * v.n_head * v.head_dim
    heads_gpu = v.n_head // b.shard
    elems = b.patches * heads_gpu * v.head_dim
    return Operator(name="vision_attention_core", group=VISION_GROUP, kind="attention", flops=flops,
                    flops_per_gpu=flops / b.shard, bytes_read_per_gpu=3 * elems * b.d.a_bytes,
                    bytes_written_per_gpu=elems * b.d.a_bytes,
                    kernel_dims=(per_image,) if per_image else (),
                    shapes=f"{b.images} image(s) x {per_image}^2 pairs x {v.n_head} heads")


def projector_ops(b: _Builder) -> List[Operator]:
    ops = []
    for i, layer in enumerate(b.v.projector):
        rows = b.patches if layer.per_patch else b.image_tokens
        name = f"projector_{layer.kind}_{i + 1}"
        if layer.kind == "linear":
            ops.append(b.matmul(name, PROJECTOR_GROUP, rows, layer.d_in, layer.d_out, layer.bias, b.shard,
                                copies=layer.copies))
        else:
            ops.append(b.norm(name, PROJECTOR_GROUP, rows, layer.d_in, layer.bias, layer.affine, layer.copies))
    return ops


def vision_parts(d, phase: Phase, image_tokens: Optional[int]):
    """(label, repeat, operators) of the tower's patch embedding, blocks and projector."""
    b = _Builder(d, phase, image_tokens)
    return [("vision embedding", 1, embedding_ops(b)), ("vision block", b.v.num_layers, block_ops(b)),
            ("projector", 1, projector_ops(b))]
