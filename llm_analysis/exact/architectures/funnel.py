"""Funnel Transformer: pooled blocks, their rows and their relative attention.

Funnel Transformer (Dai et al. 2020, arXiv 2006.03236, sec. 2.2 and appendix A.2.1) pools
the hidden states between blocks of layers (stride 2 along the sequence) and upsamples
them back before a short decoder at full length, so its layers see neither every token nor
one row per sequence: the generic walk (derive.py) cannot name their rows. This family
reads the layers itself (`_PooledModel`) and describes each with the rows of its pooling
stage:

* a layer of encoder block b runs at stage b (its hidden states pooled b times); the
  first layer of a pooled block takes its queries at stage b and, when pool_q_only
  (the default), its keys and values at stage b - 1; decoder layers run at stage 0;
* each projection's stage is read from the rows the probe saw it take (no module name
  decides it): the query stage's or the key stage's rows per sequence; its `tokens` is
  `PoolStage(k)`: the hidden states after k poolings, L_k rows per sequence, with L_0 = the
  input length and, as transformers' `FunnelEncoder` computes it: when L_{k-1} > 2
  (separate_cls) or > 1, L_k = ceil(L_{k-1} / 2), or ceil((L_{k-1} + 1) / 2) with
  separate_cls and not truncate_seq (the <cls> row is prepended before pooling); otherwise
  L_k = L_{k-1};
* the attention module's own FLOPs are one pooled relative attention core (the
  `PooledAttention` variant), its relative-position kernel and biases are parameters
  (`param`). Queries of stage q_stage attend to keys of stage kv_stage. Its scores add
  Transformer-XL style relative-position terms (Dai et al. 2019, arXiv 1901.02860, as
  Funnel's appendix A.2.1 "relative shift" writes them): the R relative-position
  embeddings are projected per head (2 R d_model H d_head FLOPs, once per call for the
  whole batch), every query is scored against all R of them (2 B H Lq R d_head), and
  against the `segments` token-type embeddings (2 B H Lq segments d_head); R follows from
  the position lists transformers builds (`relative_rows`). With `attention_type`
  "factorized" (appendix A.2.2) the position terms are instead the queries projected into
  d_model sinusoid channels and scored against two sinusoid tables of the keys
  (`_factorized_flops`). Two cases follow what transformers computes: over a single key (a
  stage of one row), scores x values is an element-wise product in torch's einsum (no
  matmul FLOPs); an input too short for the relative shift (fewer than keys + shift
  positions: with separate_cls and truncate_seq, 2..2^(blocks-1) tokens) fails in
  transformers and is refused.

Refused: `block_repeats` other than 1 (a repeated layer would run pooled once, then
unpooled) and a phase continuing a context (an encoder has no decode step).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.exact.architectures.family import AttentionVariant, ClassRule, ModelRule, RowSource
from llm_analysis.exact.architectures.records import kind_signature
from llm_analysis.exact.derive_specs import assign_tp_roles, block_group, module_specs, new_params

_LINEAR_OPS = ("linear", "conv")


class RelativeAttention(Enum):
    RELATIVE_SHIFT = "relative_shift"  # appendix A.2.1
    FACTORIZED = "factorized"  # appendix A.2.2


@dataclass(frozen=True)
class PoolingOptions:
    """The config options that decide the rows of each stage (the description's `pooling`)."""

    separate_cls: bool
    truncate_seq: bool
    pool_q_only: bool
    attention: RelativeAttention = RelativeAttention.RELATIVE_SHIFT


# ------------------------------------------------------------------ rows
_Pos = Tuple[Optional[int], range]  # a position list: an optional leading <cls> position, then a range


def _pool_len(rows: int, opts: PoolingOptions) -> int:
    if opts.separate_cls and not opts.truncate_seq:
        rows += 1  # transformers prepends the <cls> row and keeps the last one
    return -(-rows // 2)


def stage_rows(seq_len: int, stage: int, opts: PoolingOptions) -> int:
    """Rows per sequence after `stage` poolings of a `seq_len`-token input (module docstring)."""
    rows = seq_len
    for _ in range(stage):
        if rows > (2 if opts.separate_cls else 1):
            rows = _pool_len(rows, opts)
    return rows


def _pooled_pos(pos: _Pos, block: int, opts: PoolingOptions) -> _Pos:
    """transformers' `stride_pool_pos`: every second position, the <cls> one kept apart."""
    cls, body = pos
    if not opts.separate_cls:
        return None, body[::2]
    if opts.truncate_seq:
        rest = body[:-1] if cls is not None else body[1:-1]
    else:
        rest = body if cls is not None else body[1:]
    return 1 - 2 ** block, rest[::2]


def _first(pos: _Pos) -> int:
    return pos[0] if pos[0] is not None else pos[1][0]


def _last(pos: _Pos) -> int:
    return pos[1][-1] if len(pos[1]) else pos[0]


def _count(pos: _Pos) -> int:
    return len(pos[1]) + (pos[0] is not None)


def _relative_count(pos: _Pos, stride: int, pooled: Optional[_Pos] = None, shift: int = 1) -> int:
    """Length of transformers' `relative_pos` arange between `pos` and `pooled`."""
    pooled = pooled or pos
    max_dist = _first(pooled) - _first(pos) + shift * _count(pooled) * stride
    min_dist = _first(pooled) - _last(pos)
    return len(range(max_dist, min_dist - 1, -stride))


def relative_rows(seq_len: int, block: int, shift: int, opts: PoolingOptions) -> int:
    """R: relative-position embeddings block `block` uses, for queries pooled against
    unpooled keys (shift 2) or not (shift 1), as `get_position_embeds` builds them."""
    pos: _Pos = (None, range(seq_len))
    rows = {}
    for b in range(block + 1):
        pooled = pos
        if b > 0:
            pooled = _pooled_pos(pos, b, opts)
            rows[2] = _relative_count(pos, 2 ** (b - 1), pooled, shift=2)
        pos = pooled
        rows[1] = _relative_count(pos, 2 ** b)
    if shift not in rows:
        raise UnsupportedArchitectureError(f"block {block}: no relative positions for pooled queries")
    return rows[shift]


def _check_phase(desc: Dict[str, Any], phase: Any) -> None:
    if phase.past_len > 0:
        raise UnsupportedArchitectureError(
            f"{desc.get('model_type')}: pooled encoder blocks (Funnel Transformer) describe a forward over "
            "whole sequences only; a phase continuing a cached context is not described")


@dataclass(frozen=True)
class PoolStage(RowSource):
    """The rows of the hidden states after `stage` poolings, over the phase's sequences."""

    stage: int
    differs_from_tokens = True

    def rows(self, phase: Any, description: Dict[str, Any]) -> int:
        _check_phase(description, phase)
        return phase.batch * stage_rows(phase.q_len, self.stage, description["pooling"])


# -------------------------------------------------------------- attention
def _factorized_flops(b: int, h: int, d: int, lq: int, lk: int, d_model: int) -> int:
    """The factorized relative attention (appendix A.2.2): every query projected by the
    relative kernel into d_model sinusoid channels (2 B Lq H d_head d_model), then scored
    against the keys' two sinusoid tables psi and omega (2 x 2 B H Lq Lk d_model)."""
    return 2 * b * lq * h * d * d_model + 2 * 2 * b * h * lq * lk * d_model


@dataclass(frozen=True)
class PooledAttention(AttentionVariant):
    """A pooled relative attention core: queries of stage q_stage against keys of stage kv_stage."""

    block: int
    q_stage: int
    kv_stage: int
    d_model: int
    segments: int  # token-type embeddings every query is scored against

    def core_flops_and_rows(self, desc: Dict[str, Any], phase: Any, s: Dict[str, Any]) -> Tuple[float, int, int]:
        """(FLOPs, query rows, key rows per sequence) of the core over `phase`."""
        _check_phase(desc, phase)
        opts: PoolingOptions = desc["pooling"]
        lq = stage_rows(phase.q_len, self.q_stage, opts)
        lk = stage_rows(phase.q_len, self.kv_stage, opts)
        b, h, d = phase.batch, s["heads"], s["d_qk"]
        # scores x values over a single key: torch's einsum multiplies element-wise (no matmul)
        d_v = s["d_v"] if lk > 1 else 0
        common = (2 * b * h * lq * lk * (d + d_v)  # content scores and scores x values
                  + 2 * b * h * lq * self.segments * d)  # queries against the token-type embeddings
        if opts.attention is RelativeAttention.FACTORIZED:
            return float((common + _factorized_flops(b, h, d, lq, lk, self.d_model)) * s["calls"]), lq, lk
        shift = 2 if lq != lk else 1
        r = relative_rows(phase.q_len, self.block, shift, opts)
        if r - shift < lk:
            raise UnsupportedArchitectureError(
                f"{desc.get('model_type')}: an input of {phase.q_len} tokens leaves block {self.block} with {r} "
                f"relative positions for {lk} keys; transformers' Funnel attention cannot run it (its relative "
                f"shift needs at least keys + {shift}). Use a longer input.")
        flops = (common + 2 * r * self.d_model * h * d  # relative-position embeddings projected per head
                 + 2 * b * h * lq * r * d)  # queries against every relative position
        return float(flops * s["calls"]), lq, lk

    def operator(self, describer: Any, phase: Any, s: Dict[str, Any]) -> Any:
        """The Operator of the core (heads split over TP)."""
        from llm_analysis.model import Operator
        from llm_analysis.schema.options import ActivationRecomputation as AR
        flops, lq, lk = self.core_flops_and_rows(describer.description, phase, s)
        heads_gpu = s["heads"] / describer.tp
        b, a = phase.batch, describer.a_bytes
        read = b * heads_gpu * (lq * s["d_qk"] + lk * (s["d_qk"] + s["d_v"])) * a
        return Operator(name=f"{s['name']}.core", group="attention", kind="attention", flops=flops,
                        flops_per_gpu=flops / describer.tp, bytes_read_per_gpu=read,
                        bytes_written_per_gpu=b * lq * heads_gpu * s["d_v"] * a, recompute_class=AR.ATTN_COMPUTE,
                        shapes=f"{heads_gpu:g} heads x {lq} q x {lk} kv (pooled), d={s['d_qk']}/{s['d_v']}, "
                               "relative positions")


# ------------------------------------------------------- reading the layers
@dataclass
class _PooledLayer:
    path: str
    block: int
    q_stage: int
    kv_stage: int


def _funnel_attention(module: Any) -> Optional[Any]:
    """The relative attention module of a Funnel layer (its block index and its
    relative-position kernel [d_model, heads, d_head]), else None."""
    attn = getattr(module, "attention", None)
    kernel = getattr(attn, "r_kernel", None)
    if isinstance(getattr(attn, "block_index", None), int) and getattr(kernel, "dim", lambda: 0)() == 3:
        return attn
    return None


def _stack_of(lm: Any, path: str) -> str:
    """The layer list holding `path`: its parent, or the grandparent when the parent is
    itself one block of a list of blocks."""
    import torch
    parent = path.rsplit(".", 1)[0]
    grand = parent.rsplit(".", 1)[0] if "." in parent else ""
    nested = grand and isinstance(lm.get_submodule(grand), torch.nn.ModuleList)
    return grand if nested else parent


def _options(cfg: Any) -> Optional[PoolingOptions]:
    """The pooling options of the config, None when it does not state them all; refuses
    the options the description does not carry."""
    names = ("separate_cls", "truncate_seq", "pool_q_only")
    if not all(isinstance(getattr(cfg, k, None), bool) for k in names):
        return None
    model_type = getattr(cfg, "model_type", None)
    attention = getattr(cfg, "attention_type", None)
    if attention not in {a.value for a in RelativeAttention}:
        raise UnsupportedArchitectureError(
            f"{model_type}: attention_type={attention!r} is not described; 'relative_shift' "
            "and 'factorized' (arXiv 2006.03236 appendix A.2) are")
    repeats = list(getattr(cfg, "block_repeats", None) or [])
    if any(r != 1 for r in repeats):
        raise UnsupportedArchitectureError(
            f"{model_type}: block_repeats={repeats} is not described (a repeated first layer of a block runs pooled "
            "once, then unpooled); only block_repeats of 1 are")
    return PoolingOptions(*(bool(getattr(cfg, k)) for k in names), attention=RelativeAttention(attention))


class _PooledModel(ModelRule):
    def __init__(self, lm: Any, cfg: Any, probe: Any, module: Any):
        self.lm, self.cfg = lm, cfg
        self.options: Optional[PoolingOptions] = None
        self.pooled: List[_PooledLayer] = []

    def layers(self, walk: Any, stacks: List[str], layers: List[str]) -> Tuple[List[str], List[str]]:
        found = [(p, m) for p, m in self.lm.named_modules() if _funnel_attention(m) is not None]
        self.options = _options(self.cfg) if found else None
        if self.options is None:
            return stacks, layers
        for path, module in found:
            b = int(_funnel_attention(module).block_index)
            first = path.rsplit(".", 1)[-1] == "0"
            kv = b - 1 if b > 0 and first and self.options.pool_q_only else b
            self.pooled.append(_PooledLayer(path, b, b, kv))
        stacks = list(dict.fromkeys(_stack_of(self.lm, p.path) for p in self.pooled))
        return stacks, [layer.path for layer in self.pooled]

    def description_fields(self) -> Dict[str, Any]:
        return {"pooling": self.options} if self.options else {}

    def kinds(self, walk: Any, layers: List[str]) -> Optional[Tuple[List[List[Dict[str, Any]]], List[List[Any]]]]:
        """(kinds, layers) of the description (derive.py's module docstring), every layer running once."""
        if self.options is None:
            return None
        kinds: List[List[Dict[str, Any]]] = []
        index: Dict[str, int] = {}
        order: List[List[Any]] = []
        for layer in self.pooled:
            if walk.probe.calls.get(layer.path, 0) != 1:
                raise UnsupportedArchitectureError(f"layer {layer.path}: runs {walk.probe.calls.get(layer.path, 0)} "
                                                   "times in one forward; a pooled layer is described running once")
            specs = self._layer_specs(walk, layer)
            sig = kind_signature(specs)
            index.setdefault(sig, len(kinds))
            if index[sig] == len(kinds):
                kinds.append(specs)
            order.append([index[sig], True])
        return kinds, order

    def _stage_of(self, walk: Any, path: str, layer: _PooledLayer) -> int:
        """The stage whose rows the module at `path` took on every call."""
        batch, seq = walk.probe.batch, walk.probe.seq_len
        per_seq = {r // batch if r % batch == 0 else -1 for r in walk.probe.tokens.get(path, [])}
        for stage in (layer.q_stage, layer.kv_stage):
            if per_seq == {stage_rows(seq, stage, self.options)}:
                return stage
        if not per_seq:  # never ran with a tensor input (a parameter-only module): the query stage
            return layer.q_stage
        raise UnsupportedArchitectureError(
            f"{path}: takes {sorted(per_seq)} rows per sequence, neither its queries' stage {layer.q_stage} "
            f"({stage_rows(seq, layer.q_stage, self.options)} rows) nor its keys' stage {layer.kv_stage}")

    def _layer_specs(self, walk: Any, layer: _PooledLayer) -> List[Dict[str, Any]]:
        prefix = layer.path + "."
        attn = _funnel_attention(walk.lm.get_submodule(layer.path))
        attn_rel = next(p[len(prefix):] for p, m in walk.modules if m is attn and p.startswith(prefix))
        group_of = lambda name: block_group(name, [attn_rel])  # noqa: E731
        ctx = {"hidden": walk.hidden, "vocab": walk.vocab, "experts": None, "group_of": group_of, "top_k": None}
        specs: List[Dict[str, Any]] = []
        for path, module in [(layer.path, walk.lm.get_submodule(layer.path))] + \
                [(p, m) for p, m in walk.modules if p.startswith(prefix)]:
            rel = path[len(prefix):]
            own = walk.own_flops(path, module) if path in walk.probe.flops else 0
            fresh = new_params(module, walk.seen)
            if not own and not any(fresh.values()) and module is not attn:
                continue  # dropouts, activations: no parameters, no FLOPs
            stage = self._stage_of(walk, path, layer)
            calls = walk.probe.calls.get(path, 0)
            mine = module_specs(rel, module, fresh, PoolStage(stage), calls, ctx) if fresh else []
            if module is attn:
                mine[:0] = [_core(rel, attn, layer)]
            elif own and not any(s["op"] in _LINEAR_OPS for s in mine):
                raise UnsupportedArchitectureError(
                    f"{path}: computes {own:,} FLOPs the pooled layer description does not explain "
                    f"({type(module).__name__})")
            for i, s in enumerate(mine):
                s["module"], s["probe_flops"] = rel, int(own) if i == 0 else 0
            specs += mine
        assign_tp_roles(specs, walk.hidden, next(s for s in specs if s["op"] == "attention"))
        return specs


def _core(rel: str, attn: Any, layer: _PooledLayer) -> Dict[str, Any]:
    d_model, heads, d_head = (int(x) for x in attn.r_kernel.shape)
    segments = int(attn.seg_embed.shape[0]) if getattr(attn, "seg_embed", None) is not None else 0
    return {"name": rel, "op": "attention", "params": 0, "calls": 1, "group": "attention", "heads": heads,
            "kv_heads": heads, "d_qk": d_head, "d_v": d_head, "window": None, "cache_elems": 0, "causal": False,
            "variant": PooledAttention(layer.block, layer.q_stage, layer.kv_stage, d_model, segments)}


RULES = {"FunnelRelMultiheadAttention": ClassRule(model=_PooledModel)}
RECORDS = (PoolingOptions, RelativeAttention, PoolStage, PooledAttention)
