"""MLP operators of a layer: dense (gated) MLP, MoE router, routed and shared
experts, expert-parallel all-to-alls.

A MoE layer's routed experts run as a fused MoE (vLLM's and SGLang's fused_moe, FlashInfer's and
TensorRT-LLM's MoE kernels), which runs, beside the expert GEMMs and the activation, three passes
of its own that the description states as operators (`routing_ops`): the top-k selection over the
router's logits (softmax or sigmoid scores, the k best experts and their weights:
vLLM/SGLang `select_experts` / `topk_softmax`, TensorRT-LLM's routing kernel), the sort of the
token-expert pairs by expert (`moe_align_block_size`, TensorRT-LLM's permutation: each expert's
GEMM reads its tokens through the sorted indices) and the combine (each token's k expert outputs
weighted and summed: `moe_sum_reduce`, TensorRT-LLM's finalize). At a decode step's few tokens
each is one small kernel (the kernel floor); the combine reads the k outputs per token.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from llm_analysis.model.records import LayerKind, Operator, Phase
from llm_analysis.model.variants import latent_projection_ops, moe_output_ops, zero_expert_weight_ops


def combine_bytes_per_element(activation_bytes: float) -> float:
    """Bytes per element of the expert-parallel combine: the experts' outputs go back in 16 bits even when
    the dispatch carries quantised activations (DeepEP's dispatch sends FP8 with its scales and its
    combine BF16; TensorRT-LLM's MoE all-to-all quantises the dispatch to FP8 / NVFP4 and combines
    in BF16; Megatron-Core's token dispatcher keeps both in BF16), since an expert's output is a
    16-bit GEMM result summed over its top-k: never narrower than 2 bytes, 4 in an fp32 run."""
    return max(activation_bytes, 2.0)


def expert_placement(experts: int, redundant: int, ep: int, reach: float, tokens: float) -> Tuple[float, float]:
    """(routed experts held per GPU, of them those the `tokens` tokens of all `ep` expert-parallel ranks reach)
    for `experts` experts and `redundant` extra copies spread evenly over `ep` ranks; `reach`: the chance
    that one token picks a given expert (top_k over the experts the router scores).

    Without copies: experts / ep held, and of the experts E (1 - (1 - reach)^tokens) reached on the mean,
    1 / ep per GPU. With r copies (load balancing: SGLang's --ep-num-redundant-experts, TensorRT-LLM's
    load-balancer slots, vLLM's EPLB) each expert has c = 1 + r // E copies, r mod E of them one more,
    and (the assumption) a copied expert's tokens are split evenly over its copies at random, so a copy
    is reached with chance 1 - (1 - reach / c)^tokens."""
    q, extra = divmod(redundant, experts)  # (no copies: c = 1 for every expert, the first rule exactly)
    reached = sum(n * c * (1.0 - (1.0 - reach / c) ** tokens) for n, c in ((experts - extra, q + 1), (extra, q + 2)))
    held = (experts + redundant) / ep
    return held, min(held, reached / ep)


class MlpOps:
    """Mixin of `LayerDescriber`: dense MLP and mixture of experts."""

    def _ffn_ops(self, prefix: str, group: str, phase: Phase, tokens: float, ffn: int, bias: bool,
                 shard: int, copies: int = 1, expert_role: Optional[str] = None,
                 down_bias: Optional[bool] = None, io_dim: Optional[int] = None) -> List[Operator]:
        """A (gated) MLP of width `ffn` applied to `tokens` tokens, `copies` of it.
        Its projections keep their unprefixed LoRA id (an expert's up_proj is an up_proj).
        `down_bias`: the down projection's bias when it differs from the others'.
        `io_dim`: its input and output width (default hidden_dim; a latent MoE's experts)."""
        m = self.model
        h = m.hidden_dim if io_dim is None else io_dim
        ups = ["gate_proj", "up_proj"] if m.mlp_gated_linear_units else ["up_proj"]
        # a routed expert's matrices at the expert width, its biases at the other weights' (they differ only
        # when the checkpoint quantises the routed experts alone: model/checkpoint_weights.py)
        widths = (dict(weight_bytes=self.expert_w_bytes, bias_bytes=self.w_bytes) if expert_role == "routed"
                  else {})
        ops = [self._matmul(f"{prefix}{n}", group, phase, tokens, h, ffn, bias, shard=shard, copies=copies,
                            lora_target=n, **widths) for n in ups]
        if expert_role != "routed":
            # gate and up read the same input: one GEMM under serving conventions (a fused MoE's
            # routed experts keep three operators: their measured shares, cost/calibrated.py, are
            # per operator of this description)
            ops = self._fused_projections(f"{prefix}gate_up_proj", ops)
        act_elems = tokens * ffn * copies / shard
        ops.append(Operator(name=f"{prefix}act", group=group, kind="elementwise",
                            bytes_read_per_gpu=act_elems * len(ups) * self.a_bytes,
                            bytes_written_per_gpu=act_elems * self.a_bytes,
                            shapes=f"{m.activation}{'-glu' if len(ups) == 2 else ''} x {act_elems:.0f}"))
        down_bias = bias if down_bias is None else down_bias
        ops.append(self._matmul(f"{prefix}down_proj", group, phase, tokens, ffn, h, down_bias, shard=shard,
                                shard_input=True, copies=copies, lora_target="down_proj", **widths))
        for op in ops:
            op.expert_role = expert_role
        return ops

    def mlp_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        m, t = self.model, phase.tokens
        if not kind.moe:
            ffn = kind.ffn_dim or m.ffn_embed_dim
            ops = self._ffn_ops("", "mlp", phase, t, ffn, m.mlp_bias, shard=self.tp, down_bias=m.mlp_down_bias)
            return self.dense_mlp_extras(ops, phase, t, ffn)
        return self._moe_ops(phase) + moe_output_ops(self, phase)

    def routing_ops(self, phase: Phase) -> Tuple[Operator, Operator, Operator]:
        """The fused MoE's own passes (module docstring): top-k selection, the sort of the
        token-expert pairs by expert, the combine of each token's k outputs. Each GPU of the
        tensor-parallel group routes all of the step's tokens (every rank holds a slice of every
        expert); the combine reads the k partial outputs of the experts' width (the latent of a
        latent MoE) and writes one. Indices and weights are 4-byte (int32 ids, fp32 weights and
        logits, as the kernels keep them)."""
        m, t = self.model, phase.tokens
        e, k, io = m.moe_num_experts + m.moe_zero_experts, m.moe_top_k, m.expert_io_dim
        index_bytes = 4
        select = Operator(name="expert_topk", group="router", kind="elementwise",
                          bytes_read_per_gpu=t * e * index_bytes,
                          bytes_written_per_gpu=t * k * 2 * index_bytes, shapes=f"top-{k} of {e} x {t} tokens")
        sort = Operator(name="expert_sort", group="router", kind="elementwise",
                        bytes_read_per_gpu=t * k * index_bytes, bytes_written_per_gpu=t * k * index_bytes,
                        shapes=f"{t * k} token-expert pairs by expert")
        combine = Operator(name="expert_combine", group="experts", kind="elementwise",
                           bytes_read_per_gpu=t * k * (io * self.a_bytes + index_bytes),
                           bytes_written_per_gpu=t * io * self.a_bytes, shapes=f"{k} outputs of [{io}] x {t} tokens")
        return select, sort, combine

    def _moe_ops(self, phase: Phase) -> List[Operator]:
        m, t, ep = self.model, phase.tokens, self.par.ep_size
        e, k, f = m.moe_num_experts, m.moe_top_k, m.expert_ffn_dim
        h, io = m.hidden_dim, m.expert_io_dim  # io: the experts' width (latent MoE: the latent)
        z = m.moe_zero_experts  # identity experts: scored by the router, no FFN work
        ops = [self._matmul("router", "router", phase, t, h, e + z, m.moe_router_bias)]
        if m.moe_router_scales:  # Gemma4TextRouter: scale [hidden] on its input, per_expert_scale [experts]
            ops.append(self._params_op("router_scales", "router", h + e))
        select, sort, combine = self.routing_ops(phase)
        ops += [select, sort]
        into_latent, out_of_latent = latent_projection_ops(self, phase)
        ops += into_latent
        # routed experts: each token runs through k experts, each expert split over
        # tp like a dense MLP. Experts live on ep ranks that are data-parallel for
        # the rest of the model, each with its own batch: with balanced routing every
        # rank still runs t*k token-expert pairs (from all ep ranks' tokens) on its
        # e/ep local experts.
        routed = self._ffn_ops("expert_", "experts", phase, t * k * e / (e + z), f, m.moe_expert_bias,
                               shard=self.tp, expert_role="routed", io_dim=io)
        # parameters: all e experts exist, the FLOPs use only k per token
        one_expert = self._ffn_ops("expert_", "experts", phase, 0, f, m.moe_expert_bias, shard=self.tp,
                                   expert_role="routed", io_dim=io)
        # weights held per GPU (the experts and their redundant copies, over ep ranks) and read in one
        # forward: only the local experts that receive some of the ep ranks' t*ep tokens
        experts_gpu, active_gpu = expert_placement(e, self.redundant_experts, ep, k / (e + z), t * ep)
        for op, one in zip(routed, one_expert):
            if op.kind != "matmul":
                ops.append(op)
                continue
            w_gpu = one.params_per_gpu * experts_gpu
            # each expert's bytes are one's (its matrices at the expert width, its biases at theirs)
            read_w = one.weight_bytes_per_gpu * active_gpu
            # `op` was built just above for this list: set in place (dataclasses.replace is slow)
            op.bytes_read_per_gpu = op.bytes_read_per_gpu - op.weight_bytes_per_gpu + read_w
            op.params, op.params_per_gpu = one.params * e, w_gpu
            op.weight_bytes_per_gpu = one.weight_bytes_per_gpu * experts_gpu
            if z:  # a token runs k·E/(E+Z) real experts on average (the FLOPs' expectation above)
                op.active_params = one.params * k * e / (e + z)
            op.shapes = f"{op.shapes}, {e} experts top-{k}"
            if m.moe_eager_all_experts and self.conv.attention_flops == "full":
                # the eager forward (Llama4TextMoe) runs all e experts on every token: the count
                # is e/k times the routed one; what a kernel executes stays top-k (flops_per_gpu)
                eager_flops = op.flops * (e + z) / k
                op.masked_flops, op.flops = eager_flops - op.flops, eager_flops
            ops.append(op)
        ops.append(combine)
        ops += zero_expert_weight_ops(self, one_expert, ep) + out_of_latent
        if m.moe_num_shared_experts:
            ops += self._ffn_ops("shared_expert_", "experts", phase, t, m.shared_expert_ffn_dim,
                                 m.mlp_bias, shard=self.tp, copies=m.moe_num_shared_experts, expert_role="shared")
            if m.moe_shared_expert_gate:
                ops.append(self._matmul("shared_expert_gate", "router", phase, t, h, 1, False))
        if ep > 1:
            # dispatch and combine: each token's hidden state (a latent MoE's latent) to its k
            # experts and back. Under sequence parallelism a tensor-parallel rank dispatches its own 1/tp
            # slice of the tokens (Megatron-Core's token dispatcher: num_local_tokens = S/TP x B, the
            # all-to-all on those, the gather across tp on NVLink beside it)
            elems = self.sequence_parallel_tokens(t) * k * io  # (the (ep-1)/ep that leaves the GPU: all-to-all time)
            ops.append(self._collective("ep_all_to_all_dispatch", "all_to_all", "ep", ep, elems))
            ops.append(self._collective("ep_all_to_all_combine", "all_to_all", "ep", ep, elems,
                                        bytes_per_element=combine_bytes_per_element(self.a_bytes)))
        return ops
