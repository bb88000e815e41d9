"""`ModuleTreeDescriber`: operator records from a derived description (derive.py). Torch-free.

Each spec becomes one `Operator` per phase through `LayerDescriber`'s builders, so the
engine's conventions hold. A projection sees `all` tokens, one per sequence (`batch`),
the `logits` positions, or top-k of E per token (`routed`: FLOPs of t*k tokens,
parameters of all E). TP splits column-parallel projections by output, row-parallel by
input (Megatron), embedding and head by vocabulary, attention by heads; an `unknown`
role refuses tp_size > 1. A shared layer run again adds no parameters. A family's
changes are typed records (architectures/): `RowSource`, `AttentionVariant`, `state`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional

from llm_analysis.errors import ConfigError, UnsupportedArchitectureError, warn
from llm_analysis.model import LayerDescriber, LayerKind, Operator, Phase
from llm_analysis.model.mlp import combine_bytes_per_element, expert_placement
from llm_analysis.schema.options import ActivationRecomputation as AR
from llm_analysis.exact.architectures.family import PLAIN_CORE, RowSource
from llm_analysis.exact.architectures.recurrent_state import conv_outputs, state_bytes_per_seq, state_op
from llm_analysis.exact.derive_lengths import check_input_len, check_score_width
from llm_analysis.exact.layer_phase import pad_of, padded_phase, prefix_of, prefixed_phase
from llm_analysis.exact.tree_layout import check_layout, kind_window, stage_kinds

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TreeLayerKind(LayerKind):
    """A layer kind of the description: `index` into its kinds; `owns_params` False for
    a repeated execution of a shared layer."""

    index: int = 0
    owns_params: bool = True

    @property
    def label(self) -> str:
        return f"layer kind {self.index}{'' if self.owns_params else ' (shared)'}"


class ModuleTreeDescriber(LayerDescriber):
    """Describes a model from `description` (see derive.py); bind one with `for_description`."""

    description: Dict[str, Any] = {}

    @classmethod
    def for_description(cls, description: Dict[str, Any]) -> type:
        return type(f"{cls.__name__}For{description.get('model_type') or 'Model'}", (cls,),
                    {"description": description})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kinds_in_order = [self._kind(k, owns) for k, owns in self.description["layers"]]
        self.layer_groups = _count(self.kinds_in_order)
        self.stage_groups = [_count(s) for s in stage_kinds(self.kinds_in_order, self.par.pp_size)]

    def _kind(self, index: int, owns: bool) -> TreeLayerKind:
        specs = self.description["kinds"][index]
        moe = any(s.get("expert_role") == "routed" for s in specs)
        attention = "sliding_attention" if kind_window(specs) else "full_attention"
        return TreeLayerKind(moe, attention, index, bool(owns))

    def _check_layout(self) -> None:
        check_layout(self.description, self.model, self.par)

    def _specs(self, kind: LayerKind) -> List[Dict[str, Any]]:
        return self.description["kinds"][kind.index]

    # ---------------------------------------------------------------- tokens
    def _tokens(self, phase: Phase, source: str) -> int:
        if source == "all":
            return phase.tokens
        if source == "batch":
            return phase.batch
        if source == "logits":
            return self.logits_tokens(phase)
        if isinstance(source, RowSource):  # a family's rows (Funnel's pooled stages, Perceiver's latents)
            return source.rows(phase, self.description)
        return 0  # "none": the module does not run in this forward

    # ------------------------------------------------------------- operators
    def _spec_op(self, phase: Phase, s: Dict[str, Any], kind: Optional[LayerKind], owns: bool) -> List[Operator]:
        op = s["op"]
        if op == "attention":
            return [self._core_op(phase, kind, s)]
        if op in ("linear", "experts"):
            out = self._projection_op(phase, s)
        elif op == "norm":
            out = self._norm(s["name"], s["group"], self._tokens(phase, s["tokens"]) * s["calls"], s["in"],
                             bias=s["bias"])
        elif op == "embedding":
            out = self._embedding_op(phase, s)
        elif op == "conv":
            out = self._conv_op(phase, s)
        elif op == "row_flops":
            out = self._row_flops_op(phase, s)
        elif op == "state":  # a recurrent mixer's state (architectures/recurrent_state.py)
            return [state_op(phase, s, self.kv_bytes, self.conv.attention_flops == "causal")]
        elif op == "param":
            # an idle module (derive_stacks.idle_spec) holds its weights and reads none
            out = Operator(name=s["name"], group=s["group"], kind="elementwise", params=s["params"],
                           params_per_gpu=s["params"], weight_bytes_per_gpu=s["params"] * self.w_bytes,
                           bytes_read_per_gpu=0.0 if s.get("idle") else s["params"] * self.w_bytes)
        else:  # "unexplained": verification refuses such descriptions
            return []
        return [_own_params(out, s["params"] if owns else 0)]

    def _projection_op(self, phase: Phase, s: Dict[str, Any]) -> Operator:
        role, copies = s["tp"], s["copies"]
        shard = self.tp if role in ("column", "row", "vocab") else 1
        lora = s["name"].rsplit(".", 1)[-1]
        if s["tokens"] != "routed":
            wb = self.e_bytes if role == "vocab" else None
            return self._matmul(s["name"], s["group"], phase, self._tokens(phase, s["tokens"]) * s["calls"],
                                s["in"], s["out"], s["bias"], shard=shard, shard_input=role == "row",
                                copies=copies, weight_bytes=wb, lora_target=lora)
        # routed experts: each token runs through top-k of the E copies (FLOPs of t*k
        # tokens), all E exist (parameters), E/ep live on each GPU (as LayerDescriber._moe_ops)
        e, k = copies, self.description["experts"]["top_k"]
        one = self._matmul(s["name"], s["group"], phase, phase.tokens * k * s["calls"], s["in"], s["out"],
                           s["bias"], shard=shard, shard_input=role == "row", lora_target=lora,
                           weight_bytes=self.expert_w_bytes, bias_bytes=self.w_bytes)
        experts_gpu, active_gpu = expert_placement(e, self.redundant_experts, self.par.ep_size, k / e,
                                                   phase.tokens * self.par.ep_size)
        w_gpu = one.params_per_gpu * experts_gpu
        # each expert's bytes are one's (its matrices at the expert width, its biases at theirs)
        return replace(one, params=one.params * e, params_per_gpu=w_gpu,
                       weight_bytes_per_gpu=one.weight_bytes_per_gpu * experts_gpu,
                       bytes_read_per_gpu=one.bytes_read_per_gpu - one.weight_bytes_per_gpu
                       + one.weight_bytes_per_gpu * active_gpu,
                       shapes=f"{one.shapes}, {e} experts top-{k}", expert_role="routed")

    def _row_flops_op(self, phase: Phase, s: Dict[str, Any]) -> Operator:
        """Matmuls on activations measured per input row (derive_specs.row_flops_spec); the
        rows' activations are read and written once (hidden width)."""
        t = self._tokens(phase, s["tokens"]) * s["calls"]
        flops = float(s["flops_per_row"]) * t
        act = t * self.description["hidden_dim"] * self.a_bytes
        return Operator(name=s["name"], group=s["group"], kind="matmul", flops=flops, flops_per_gpu=flops,
                        bytes_read_per_gpu=act, bytes_written_per_gpu=act, shapes=f"{s['flops_per_row']} FLOPs x {t} rows")

    def _embedding_op(self, phase: Phase, s: Dict[str, Any]) -> Operator:
        rows, d = s["in"], s["out"]
        rows_gpu = -(-rows // self.tp) if s["tp"] == "vocab" else rows
        t = self._tokens(phase, s["tokens"]) * s["calls"]
        return Operator(name=s["name"], group="embedding", kind="embedding", params=rows * d,
                        params_per_gpu=rows_gpu * d, weight_bytes_per_gpu=rows_gpu * d * self.e_bytes,
                        bytes_read_per_gpu=t * d * self.e_bytes, bytes_written_per_gpu=t * d * self.a_bytes,
                        shapes=f"[{rows}x{d}] lookup x {t}")

    def _conv_op(self, phase: Phase, s: Dict[str, Any]) -> Operator:
        """A 1-D convolution over the sequence: each output position is a dot product of
        in/groups x kernel inputs per output channel (the FLOPs FlopCounterMode counts)."""
        t = conv_outputs(phase, s, self.conv.attention_flops == "causal", self._tokens(phase, s["tokens"])) * s["calls"]
        per_out = s["in"] // s["conv_groups"] * s["kernel"]
        params = s["out"] * per_out + (s["out"] if s["bias"] else 0)
        flops = 2.0 * t * s["out"] * per_out
        return Operator(name=s["name"], group=s["group"], kind="matmul", params=params, params_per_gpu=params,
                        weight_bytes_per_gpu=params * self.w_bytes, flops=flops, flops_per_gpu=flops,
                        bytes_read_per_gpu=params * self.w_bytes + t * s["in"] * self.a_bytes,
                        bytes_written_per_gpu=t * s["out"] * self.a_bytes)

    def _core_op(self, phase: Phase, kind: Optional[LayerKind], s: Dict[str, Any]) -> Operator:
        """q x k^T and scores x v over the keys each query attends to (conventions of
        `llm_analysis.model`), for this layer's heads and head widths, as the core's family
        variant counts them (its pairs, FLOPs and cached keys; or its whole operator)."""
        variant = s.get("variant") or PLAIN_CORE
        whole = variant.operator(self, phase, s)  # Funnel's pooled, Perceiver's latent cores
        if whole is not None:
            return whole
        heads, d_qk, d_v, window = s["heads"], s["d_qk"], s["d_v"], s["window"]
        attended = min(phase.kv_len, window) if window else phase.kv_len
        if not s["causal"] or (phase.past_len == 0 and self.conv.attention_flops == "full"):
            pairs = phase.q_len * phase.kv_len  # eager: the whole score matrix, masked afterwards
        elif self.conv.attention_flops == "causal":
            pairs = variant.causal_pairs(phase.q_len, phase.past_len, window)  # Llama 4's chunks
        else:
            pairs = phase.q_len * attended
        check_score_width(s, phase)
        # keys beyond the window's (DeepSeek-V4's compressed entries)
        pairs, entries_read = variant.with_entries(pairs, phase.q_len, phase.past_len,
                                                   s["causal"] and self.conv.attention_flops == "causal")
        flops = variant.core_flops(s, phase)  # Longformer's sliding chunks
        if flops is None:
            flops = 2.0 * phase.batch * heads * pairs * (s.get("score_width", d_qk) + d_v) * s["calls"]
        heads_gpu = heads / self.tp
        cache_gpu = self._cache_elems_gpu(s)
        kv_read = phase.batch * attended * cache_gpu * self.kv_bytes if phase.past_len > 0 and \
            variant.reads_window() else 0.0
        kv_read += phase.batch * entries_read * variant.entry_elements() * self.kv_bytes
        new = phase.tokens * (cache_gpu or heads_gpu * (d_qk + d_v))
        return Operator(
            name=f"{s['name']}.core", group="attention", kind="attention", flops=flops,
            flops_per_gpu=flops / self.tp,
            bytes_read_per_gpu=phase.tokens * heads_gpu * d_qk * self.a_bytes + kv_read + new * self.a_bytes,
            bytes_written_per_gpu=phase.tokens * heads_gpu * d_v * self.a_bytes
            + phase.tokens * cache_gpu * self.kv_bytes,
            kv_cache_bytes_read_per_gpu=kv_read, recompute_class=AR.ATTN_COMPUTE,
            shapes=f"{heads_gpu:g} heads x {phase.q_len} q x {attended} kv, d={d_qk}/{d_v}")

    def _cache_elems_gpu(self, s: Dict[str, Any]) -> float:
        """Cached elements per token of one attention core on one GPU: KV heads split over
        TP (replicated when fewer than tp_size), a latent cache replicated."""
        elems, kv = s["cache_elems"], s["kv_heads"]
        if not elems:
            return 0.0
        if elems == kv * (s["d_qk"] + s["d_v"]):
            return elems * max(kv // self.tp, 1) / kv
        return float(elems)

    # ---------------------------------------------------------------- layers
    def layer_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        refusal = self.description.get("refused_phases", {}).get(phase.name)
        if refusal and not phase.shapes_only:  # derive_stacks.refused_phases
            raise UnsupportedArchitectureError(f"{self.model.name}: the {phase.name} phase cannot be described: {refusal}")
        check_input_len(self.description, phase.q_len)
        self._warn_train_rows(phase)  # pooled / latent rows: the activation estimate does not follow them
        phase = padded_phase(prefixed_phase(phase, prefix_of(self.description)), pad_of(self.description))
        ops: List[Operator] = []
        for s in self._specs(kind):
            for op in self._spec_op(phase, s, kind, kind.owns_params):
                if s["group"] == "attention" and op.recompute_class.value > AR.ATTN.value:
                    op.recompute_class = AR.ATTN
                ops.append(op)
        return ops + self._comm_ops(phase, kind)

    def _comm_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        """One TP all-reduce (or reduce-scatter + all-gather) after each block ending in a
        row-parallel projection; EP all-to-alls around routed experts."""
        ops: List[Operator] = []
        elems = phase.tokens * self.description["hidden_dim"]
        blocks = []
        for s in self._specs(kind):
            block = "attention" if s["group"] == "attention" else "mlp"
            if s.get("tp") == "row" and block not in blocks:
                blocks.append(block)
        if self.tp > 1:
            for block in blocks:
                rc = AR.ATTN if block == "attention" else AR.FULL
                if self.par.sp_size > 1:
                    ops.append(self._collective(f"tp_reduce_scatter_{block}", "reduce_scatter", "tp", self.tp, elems, rc))
                    ops.append(self._collective(f"tp_all_gather_{block}", "all_gather", "tp", self.tp, elems, rc))
                else:
                    ops.append(self._collective(f"tp_all_reduce_{block}", "all_reduce", "tp", self.tp, elems, rc))
        if self.par.ep_size > 1 and kind.moe:
            moved = elems * self.description["experts"]["top_k"]
            ops.append(self._collective("ep_all_to_all_dispatch", "all_to_all", "ep", self.par.ep_size, moved))
            ops.append(self._collective("ep_all_to_all_combine", "all_to_all", "ep", self.par.ep_size, moved,
                                        bytes_per_element=combine_bytes_per_element(self.a_bytes)))
        return ops

    def _warn_train_rows(self, phase: Phase) -> None:
        """Log `rows_note` (when it applies) once per describer, at its first training phase."""
        if phase.name != "train":
            return
        checked = self.memoized(("rows_note_checked",), lambda: [False])
        if checked[0]:
            return
        checked[0] = True
        note = rows_note(self.description)
        if note:
            warn(logger, "%s: FLOPs and bytes follow each layer's rows%s", self.description.get("model_type"), note)

    def mixer_state_bytes_per_seq_per_gpu(self, groups: Dict[LayerKind, int]) -> float:
        """State bytes of one sequence over the recurrent mixers of `groups` (architectures/recurrent_state.py)."""
        return sum(n * state_bytes_per_seq(self._specs(k), self.kv_bytes) for k, n in groups.items())

    def kv_cache_elems_per_token_per_gpu(self, kind: LayerKind) -> float:
        return float(sum(self._cache_elems_gpu(s) for s in self._specs(kind) if s["op"] == "attention"))

    def attended_len(self, kind: LayerKind, context_len: int) -> int:
        context_len += prefix_of(self.description)
        w = kind_window(self._specs(kind))
        return min(context_len, w) if w else context_len

    def cached_len(self, kind: LayerKind, seq_len: int) -> float:
        """Tokens a layer of this kind caches per sequence; with keys beyond the window's
        (an attention variant's `cached_elems`: DeepSeek-V4's entries, pooling buffers, overlap
        state) their elements are added in units of one cached token's elements, so that the
        memory view's cached_len x elements per token is the cache's exact size."""
        seq_len += prefix_of(self.description)
        specs = self._specs(kind)
        w = kind_window(specs)
        tokens = min(seq_len, w - 1) if w else seq_len
        extra = sum(s["variant"].cached_elems(seq_len) for s in specs if s["op"] == "attention" and s.get("variant"))
        return tokens + extra / self.kv_cache_elems_per_token_per_gpu(kind) if extra else tokens

    # ------------------------------------------------------- embedding / head
    def embedding_ops(self, phase: Phase) -> List[Operator]:
        phase = padded_phase(phase, pad_of(self.description))  # padded before the lookup (Longformer)
        ops = [op for s in self.description["embedding"] for op in self._spec_op(phase, s, None, True)]
        if self.tp > 1 and any(s.get("tp") == "vocab" for s in self.description["embedding"]):
            ops.append(self._collective("tp_all_reduce_embedding", "all_reduce", "tp", self.tp,
                                        phase.tokens * self.description["hidden_dim"]))
        return ops

    def head_ops(self, phase: Phase, with_embedding: bool = True) -> List[Operator]:
        ops = []
        for s in self.description["head"]:
            for op in self._spec_op(phase, s, None, True):
                if s["op"] == "linear" and not with_embedding and op.params == 0:
                    # a tied head on another pipeline stage than the embedding keeps a copy
                    full = s["in"] * s["out"] / (self.tp if s["tp"] == "vocab" else 1)
                    op.weight_bytes_per_gpu = full * self.e_bytes
                ops.append(op)
        return ops


def _own_params(op: Operator, params: int) -> Operator:
    """The operator owning `params` new parameters (0 for a tied weight or a shared layer
    run again): per-GPU parameters and weight memory scale with it, bytes read do not."""
    if op.params == params:
        return op
    scale = params / op.params if op.params else 0.0
    op.params = int(params)
    op.params_per_gpu *= scale
    op.weight_bytes_per_gpu *= scale
    return op


def rows_note(desc: Dict[str, Any]) -> str:
    """Says that training's activation-memory estimate (Korthikanti et al. 2022, per layer
    at the input length) does not follow layers whose rows are not the tokens (Funnel's
    pooled stages, Perceiver's latents and output queries); parameters, FLOPs, bytes
    moved and inference memory do (they come from the operators)."""
    if not any(getattr(s.get("tokens"), "differs_from_tokens", False) for kind in desc["kinds"] for s in kind):
        return ""
    return ("; some layers see fewer or more rows than the input has tokens (pooled stages or a latent array): "
            "training's activation-memory estimate assumes every layer sees the input length")


def _count(kinds) -> Dict[Any, int]:
    out: Dict[Any, int] = {}
    for k in kinds:
        out[k] = out.get(k, 0) + 1
    return out


__all__ = ["ModuleTreeDescriber", "TreeLayerKind", "ConfigError"]
