"""Derive the operator description of any model transformers can build, from its module tree.

`derive_description(hf_config)` builds the causal (or masked) LM on the meta
device, runs one small prefill under FlopCounterMode with a hook on every module
(`probe.py`), and reads the module tree into a JSON-able description:

    {"format", "model_type", "lm_class", "task", "hidden_dim", "vocab_size",
     "max_seq_len", "experts": {"count", "top_k"} | None,
     "embedding": [spec...], "head": [spec...],       # outside the layer stack
     "kinds": [[spec...], ...],                        # distinct layer descriptions
     "layers": [[kind index, owns its parameters], ...],  # every executed layer, in order
     "probe": {"batch", "seq_len", "flops", "params"},
     "probe_long": {"batch", "seq_len", "flops"},     # a 1024-token prefill, FLOPs only
     "max_input_len": longest input of the described code path, or None (derive_lengths.py),
     "prefix_tokens": P,            # only when the model prepends P tokens itself (layer_phase.py)
     "pad_to_multiple": m,          # only when the model pads its inputs (layer_phase.py)
     "refused_phases": {phase: why},  # only when a phase cannot be described (derive_stacks.py)
     ...}                             # fields of a family's rule (architectures/: Funnel's `pooling`)

Spec fields: see `derive_specs.py`; attention cores are specs with op "attention"
(heads, kv_heads, d_qk, d_v, window, cache_elems). Families whose modules the generic
reading cannot describe register rules by transformers class name (architectures/): the
specs of their modules (recurrent mixers' `state`), the `variant` of their attention cores,
the rows their modules see (`tokens` records: pooled stages, latent rows), their own
reading of the layers, and fields of the description. Routed experts transformers runs
densely carry `eager_experts` (dense_experts.py). A layer module that runs several
times (ALBERT's shared layer) appears once owning its parameters and then as
executions that own none; several stacks of one layer shape (HRM-Text) are read in
module order. A module a text-only forward never runs (an image encoder, a
cross-attention layer without image features) is one `param` spec marked `idle`
(derive_stacks.py). `verify_description` (derive_check.py) then checks the
description against the model's parameters and FLOPs, module by module. The description
holds typed records (architectures/records.py encodes them for the cache).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError
import llm_analysis.exact.architectures as families
from llm_analysis.exact.architectures.family import PLAIN_CORE
from llm_analysis.exact.dense_experts import dense_experts, dense_experts_reason, mark_dense
from llm_analysis.exact.derive_lengths import full_attention_path
from llm_analysis.exact.derive_sites import (FIT_SEQ_LEN, attention_sites, core_helper_children, layer_calls,
                                             same_length_conv_rows)
from llm_analysis.exact.derive_specs import (assign_tp_roles, attention_spec, block_group, config_int, expert_role,
                                             fold_expert_index, is_embedding, missing_top_k, module_specs, new_params,
                                             num_experts, row_flops_spec, rows_per_token, token_source, top_k)
from llm_analysis.exact.derive_stacks import idle_roots, idle_spec, inside_any, layer_stacks, refused_phases
from llm_analysis.exact.diagnose import MIXER_PARAMS as _MIXER
from llm_analysis.exact.layer_phase import is_prefixed, prefix_rows

FORMAT_VERSION = 2  # 2: typed records (architectures/records.py)
PROBE_BATCH = 2  # two sequences, so that "one row per sequence" differs from "one per token"
PROBE_SEQ_LEN = 16
LONG_PROBE_SEQ_LEN = 1024  # meta tensors: a longer probe costs no arithmetic


class _Walk:
    """State of one walk over the module tree."""

    def __init__(self, lm: Any, cfg: Any, probe: Any, task: str, rules: List[Any]):
        self.lm, self.cfg, self.probe, self.task = lm, cfg, probe, task
        self.rules = rules  # the model rules of the families the model holds (architectures/)
        self.hidden = config_int(cfg, ("hidden_size", "d_model", "n_embd", "dim", "embed_dim"))
        self.vocab = config_int(cfg, ("vocab_size",))
        self.experts = num_experts(cfg)
        self.modules = list(lm.named_modules())
        self.seen: set = set()
        self.prefix = 0  # tokens the model prepends to every sequence (layer_phase.py)
        self.idle = idle_roots(lm, probe.calls)
        self.dense: List[str] = []  # experts every token runs through, no top-k (dense_experts.py)
        self.dense_eager: Dict[str, int] = {}  # ... with a top-k: described routed (dense_experts.py)
        self.absorbed: Dict[str, int] = {}  # core helper children: their FLOPs are the parent's
        self.fit_probe: Any = None

    def own_flops(self, path: str, module: Any) -> int:
        """FLOPs of `path` minus those of the modules it called (a container that is
        never called itself, like a ModuleList, passes its children through)."""
        if path in self.absorbed:
            return 0
        return self.probe.flops.get(path, 0) - self._called_children_flops(path, module, self.probe)

    def _called_children_flops(self, path: str, module: Any, probe: Any) -> int:
        total = 0
        for name, child in module.named_children():
            child_path = f"{path}.{name}" if path else name
            if child_path in self.absorbed:
                continue
            if child_path in probe.flops:
                total += probe.flops[child_path]
            elif child_path not in probe.calls:
                total += self._called_children_flops(child_path, child, probe)
        return total

    def parent(self, path: str) -> Any:
        return self.lm.get_submodule(path.rsplit(".", 1)[0]) if "." in path else self.lm

    def fit_point(self, path: str, module: Any, calls: int) -> Tuple[int, int, int]:
        """(batch, seq_len, own FLOPs per layer execution) of `path` in a third prefill
        (derive_sites.FIT_SEQ_LEN tokens), run once when an attention module does more than
        its eager core: with the probe, it separates work per query-key pair from work per
        token; the long probe then checks the split at another length."""
        if self.fit_probe is None:
            from llm_analysis.exact.probe import run_probe
            self.fit_probe, _ = run_probe(self.lm, 1, FIT_SEQ_LEN)
        if self.fit_probe is None:
            return 1, FIT_SEQ_LEN, -1
        own = self.fit_probe.flops.get(path, 0) - self._called_children_flops(path, module, self.fit_probe)
        return 1, FIT_SEQ_LEN, own // max(calls, 1)

    def tokens(self, path: str, module: Any, in_layer: bool) -> Tuple[str, int]:
        """(token source, rows per token): rows per token > 1 for a module outside the
        experts that sees the same whole number of rows for every token (hyper-connection
        streams, grouped output projections)."""
        fixed = next((f for f in (r.token_source(path) for r in self.rules) if f), None)
        if fixed:  # rows a family fixes (Perceiver's latents and output queries)
            return fixed, 1
        b, t = self.probe.batch, self.probe.seq_len
        rows = same_length_conv_rows(module, self.probe.elems.get(path, [])) or self.rows(path, module)
        source = token_source(rows, b, t)
        if source == "unknown" and any(r.reads_every_token(rows, b, t) for r in self.rules):
            return "all", 1  # every token of the phase as the family runs it (Longformer's padded inputs)
        if source == "unknown" and in_layer and is_prefixed(rows, b, t, self.prefix):
            return "all", 1  # every token of the phase the layers run (layer_phase.prefixed_phase)
        if source == "unknown" and expert_role(path) is not None:
            dense = dense_experts(module, rows, b * t)
            if dense and top_k(self.cfg):  # described as routed, reconciled (dense_experts.py)
                self.dense_eager[path] = dense
                return "all", 1
            if dense:  # refused in describe_tree
                self.dense.append(dense_experts_reason(path, type(module).__name__, dense, top_k(self.cfg)))
        if source == "unknown" and not is_embedding(module) and expert_role(path) is None:
            # several rows per token: the same number on every call, or a family's reading
            # (ProphetNet's streams: a whole but varying number)
            per_token = rows_per_token(rows, b * t) or max((r.rows_per_token(rows, b * t) for r in self.rules),
                                                          default=0)
            if per_token > 1:
                return "all", per_token
        return source, 1

    def rows(self, path: str, module: Any) -> List[int]:
        """Rows of the module's first input on each call: one per looked-up id for an
        embedding and for the model itself (its first input is the token ids [batch,
        seq]: matmuls at the top level, NeoMME's `hidden @ unembedding.weight`, run per
        token, not per sequence)."""
        return (self.probe.elems if is_embedding(module) or path == "" else self.probe.tokens).get(path, [])

    def module_specs(self, path: str, module: Any, rel: str, calls: int, group_of, layer_index: Optional[int]
                     ) -> List[Dict[str, Any]]:
        """Specs of one module: its parameters (projections, norms, ...) and, when it
        computes FLOPs that no projection of its own explains, an attention core (or an
        `unexplained` spec). `calls`: runs of the enclosing layer (1 outside layers)."""
        if inside_any(path, self.idle):  # a module a text-only forward never runs (derive_stacks.idle_roots)
            spec = idle_spec(rel, module, self.seen) if path in self.idle else None
            return [dict(spec, module=rel, probe_flops=0)] if spec and spec["params"] else []
        own = self.own_flops(path, module) if path in self.probe.flops else 0
        if own == 0 and "attention" in (rel + type(module).__name__).lower() and path not in self.absorbed:
            helpers = core_helper_children(path, module, self.probe.flops, lambda: self._eager_core_flops(
                rel, module, layer_index, self.probe.calls.get(path, 0) // max(calls, 1)) * max(calls, 1))
            self.absorbed.update(helpers)
            own = sum(helpers.values())
        per_exec = self.probe.calls.get(path, 0) // max(calls, 1)
        fresh = new_params(module, self.seen)
        ctx = {"hidden": self.hidden, "vocab": self.vocab, "experts": self.experts, "group_of": group_of,
               "top_k": top_k(self.cfg)}
        source, per_token = self.tokens(path, module, layer_index is not None)
        specs = families.module_specs(rel, module, fresh, per_exec, self.parent(path))  # a family's module
        if specs is not None:
            per_token = 1
        else:
            specs = module_specs(rel, module, fresh, source, per_exec, ctx) if fresh else []
            mark_dense(specs, self.dense_eager.get(path))
        if per_token > 1:
            # several rows per token: the weight is not applied once per row (a grouped
            # projection, streams flattened first); its FLOPs are measured per token below
            for s in specs:
                s["op"] = "param" if s["op"] in ("linear", "conv") else s["op"]
        if own > 0 and not any(_explains_flops(s) for s in specs):
            sites = self._site_spec(path, rel, module, own // max(calls, 1), per_exec, layer_index, per_token,
                                    calls)
            for site in sites:
                if site["op"] == "row_flops" and site.get("group") != "attention":
                    site["group"] = group_of(rel) if rel else "mlp"
            specs[:0] = sites
        for i, s in enumerate(specs):
            # the module's measured FLOPs per layer execution, on its first spec (a fused
            # experts module has one spec per weight: they are compared together)
            s["module"] = rel
            s["probe_flops"] = int(own // max(calls, 1)) if i == 0 else 0
        return specs

    def _site_spec(self, path: str, rel: str, module: Any, own_per_exec: int, per_exec: int,
                   layer_index: Optional[int], per_token: float, calls: int = 1) -> List[Dict[str, Any]]:
        """[an attention core (and its per-token remainder)], or [matmuls measured per token],
        or [`unexplained`]."""
        for rule in self.rules:  # a family's reading (Perceiver's fixed rows)
            sites = rule.site_specs(self, path, rel, module, own_per_exec, per_exec)
            if sites is not None:
                return sites
        # matmuls on activations with weights read from elsewhere (AltUp's coefficients, a
        # head multiplying by a concatenated weight, a short convolution run as a function):
        # FLOPs per row of the module's input, when that is a whole number; the long probe
        # checks that they scale with the tokens
        rows = row_flops_spec(rel or type(module).__name__, type(module).__name__, self.rows(path, module),
                              per_exec, own_per_exec, self.probe.batch, self.probe.seq_len)
        if _MIXER.search("\n".join(n for n, _ in module.named_parameters())):
            # a recurrent / SSM / convolution mixer: a decode step runs its state update, not
            # the prefill's per-token work, and only the prefill is probed (issue 14 item 4)
            rows = dict(rows, op="unexplained", **{"class": f"{type(module).__name__}, a sequence mixer"})
        # a module mixing several rows per token with a matrix of its own (hyper-connection
        # streams) is no attention core; one without parameters may be (its first input
        # can be per-head queries)
        streams = per_token > 1 and any(p.dim() >= 2 for p in module.parameters(recurse=False))
        if streams or not ("attn" in rel.lower() or "attention" in (rel + type(module).__name__).lower()):
            return [rows]
        core = self._core(rel, module, layer_index, per_exec)
        if not (core.get("variant") or PLAIN_CORE).fits_remainder:  # Longformer's sliding chunks
            return [core]
        # a module inside an attention module but not named as one itself (a short
        # convolution on the keys) whose FLOPs are not the eager core's (every query-key pair)
        b, t = self.probe.batch, self.probe.seq_len
        eager = self._eager_core_flops(rel, module, layer_index, per_exec)
        last = rel.rsplit(".", 1)[-1]
        inside = not ("attn" in last.lower() or "attention" in (last + type(module).__name__).lower())
        if inside and eager != own_per_exec and rows["op"] == "row_flops":
            return [rows]
        remainder = lambda flops: row_flops_spec(  # noqa: E731
            rel, type(module).__name__, self.rows(path, module), per_exec, flops, b, t)
        fit = self.fit_point(path, module, calls) if own_per_exec != eager else None
        return attention_sites(core, own_per_exec, eager, remainder, (b, t), fit)


    def _core(self, rel: str, module: Any, layer_index: Optional[int], per_exec: int) -> Dict[str, Any]:
        """The attention core computed in `module`, with its family's variant (architectures/)."""
        core = attention_spec(rel, module, self.cfg, layer_index, per_exec, self.task == "masked-lm")
        return families.attention_core(core, module, self.cfg, layer_index)

    def _eager_core_flops(self, rel: str, module: Any, layer_index: Optional[int], per_exec: int) -> int:
        """FLOPs of the eager attention core of `module` at the probe (every query-key pair)."""
        core = self._core(rel, module, layer_index, per_exec)
        b, t = self.probe.batch, self.probe.seq_len
        keys = (core.get("variant") or PLAIN_CORE).eager_keys(t)  # t, plus DeepSeek-V4's compressed entries
        return 2 * b * core["heads"] * t * keys * (core["d_qk"] + core["d_v"]) * max(per_exec, 1)


_COMPUTING = ("linear", "experts", "conv", "row_flops")


def _explains_flops(s: Dict[str, Any]) -> bool:
    """True when the spec accounts for its module's own FLOPs: a projection or convolution,
    an attention core a family read, or a recurrence with matmuls."""
    state = s.get("state")
    return s["op"] in _COMPUTING or s["op"] == "attention" or bool(state and state.recurrence)


def _stack_layers(lm: Any, calls: Dict[str, int]) -> Tuple[List[str], List[str]]:
    """The layer stacks (derive_stacks.layer_stacks) and their layers, in order."""
    stacks = layer_stacks(lm, calls)
    if not stacks:
        raise UnsupportedArchitectureError(f"{type(lm).__name__} has no repeated layer stack")
    return stacks, [p for stack in stacks for p in _layer_paths(stack, lm.get_submodule(stack))]


def _layer_paths(path: str, container: Any) -> List[str]:
    """The layers in a stack container, in order: a child that is itself a list of layers
    (Funnel's blocks of layers) is never called, its layers are."""
    import torch
    out: List[str] = []
    for name, child in container.named_children():
        if isinstance(child, torch.nn.ModuleList) and len(child):
            out += _layer_paths(f"{path}.{name}", child)
        else:
            out.append(f"{path}.{name}")
    return out


def _layer_specs(w: _Walk, layer: str, index: int, calls: int) -> List[Dict[str, Any]]:
    prefix = layer + "."
    inside = [(p, m) for p, m in w.modules if p == layer or p.startswith(prefix)]
    sites = [p[len(prefix):] for p, m in inside
             if p in w.probe.flops and w.own_flops(p, m) > 0 and not any(True for _ in m.parameters(recurse=False))]
    group_of = lambda name: block_group(name, sites)  # noqa: E731
    specs: List[Dict[str, Any]] = []
    folded: Dict[str, Dict[str, Any]] = {}
    for path, module in inside:
        for s in w.module_specs(path, module, path[len(prefix):], calls, group_of, index):
            _add_folded(specs, folded, s)
    heads = next((s for s in specs if s["op"] == "attention"), None)
    assign_tp_roles(specs, w.hidden, heads)
    return specs


def _add_folded(specs: List[Dict[str, Any]], folded: Dict[str, Dict[str, Any]], s: Dict[str, Any]) -> None:
    """Experts kept as a list of modules fold into one spec with `copies`."""
    key = fold_expert_index(s["name"])
    if key == s["name"]:
        specs.append(s)
        return
    if key in folded:
        folded[key]["copies"] += 1
        folded[key]["params"] += s["params"]
        return
    s = dict(s, name=key)
    folded[key] = s
    specs.append(s)


def _outside_specs(w: _Walk, stacks: List[str]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Specs of the modules outside the layer stack: before it (embedding part) and
    after it (head part), in module order."""
    before: List[Dict[str, Any]] = []
    after: List[Dict[str, Any]] = []
    past = False
    for path, module in w.modules:
        if inside_any(path, stacks):
            past = True
            continue
        for s in w.module_specs(path, module, path, 1, lambda name: "other", None):
            if s["op"] in ("attention", "unexplained"):  # compute outside the layers: not modelled
                s["op"] = "unexplained"
            (after if past else before).append(_outside_group(s, past, w.vocab))
    return before, after


def _outside_group(s: Dict[str, Any], head: bool, vocab: Optional[int]) -> Dict[str, Any]:
    if s["op"] == "embedding":
        return s
    if s["op"] == "norm":
        s["group"] = "norm" if head else "embedding"
    else:
        s["group"] = "lm_head" if head else "embedding"
    if s["op"] == "linear" and head and s["out"] == vocab:
        s["tp"], s["tokens"] = "vocab", "logits" if s["tokens"] == "all" else s["tokens"]
    return s


def _kinds(w: _Walk, layers: List[str]) -> Tuple[List[List[Dict[str, Any]]], List[List[Any]]]:
    kinds: List[List[Dict[str, Any]]] = []
    signatures: Dict[str, int] = {}
    order: List[List[Any]] = []
    for i, layer in enumerate(layers):
        module = w.lm.get_submodule(layer)
        calls = layer_calls(layer, module, w.probe.calls)
        if not calls and (w.probe.calls.get(layer, 0) or any(inside_any(p, [layer]) for p in w.probe.calls)):
            raise UnsupportedArchitectureError(f"layer {layer}: cannot tell how often it runs (its modules ran "
                                               "unequal numbers of times)")
        # a layer that never runs (Mllama's cross-attention layers without image
        # features) is idle: its parameters, one execution doing nothing
        idle = idle_spec("", module, w.seen) if not calls else None
        specs = _layer_specs(w, layer, i, calls) if calls else (
            [dict(idle, module="", probe_flops=0)] if idle["params"] else [])
        calls = max(calls, 1)
        sig = families.kind_signature(specs)
        if sig not in signatures:
            signatures[sig] = len(kinds)
            kinds.append(specs)
        order += [[signatures[sig], True]] + [[signatures[sig], False]] * (calls - 1)
    return kinds, order


def _prefix_tokens(lm: Any, probe: Any, first_layer: str) -> int:
    """Tokens the model prepends to every sequence (layer_phase.py), when the first
    layer sees a constant P more rows per sequence than the probe has tokens, at the
    probe's length and at 8 tokens more (several rows per token, hyper-connection
    streams, grow with the length instead)."""
    from llm_analysis.exact.probe import run_probe
    prefix = prefix_rows(probe.tokens.get(first_layer, []), probe.batch, probe.seq_len)
    if not prefix:
        return 0
    other, _ = run_probe(lm, probe.batch, probe.seq_len + 8)
    rows = other.tokens.get(first_layer, []) if other is not None else []
    return prefix if prefix_rows(rows, probe.batch, probe.seq_len + 8) == prefix else 0


def describe_tree(models: Any, probe: Any, max_input_len: Optional[int] = None) -> Dict[str, Any]:
    """The description (module docstring) of a built model and its probe; `max_input_len`:
    the longest input of the described code path (derive_lengths.py), which a family may lower."""
    lm, cfg = models.lm, models.config
    rules = families.model_rules(lm, cfg, probe)
    refusal = next((r for r in (rule.refusal() for rule in rules) if r), None)  # DeepSeek-V4's unread layouts
    if refusal:
        raise UnsupportedArchitectureError(f"{getattr(cfg, 'model_type', None)}: {refusal}")
    w = _Walk(lm, cfg, probe, models.task, rules)
    stacks, layers = _stack_layers(lm, probe.calls)
    for rule in rules:  # Funnel's pooled blocks, Perceiver's latent layers
        stacks, layers = rule.layers(w, stacks, layers)
    w.prefix = _prefix_tokens(lm, probe, layers[0])
    kinds, order = next((k for k in (rule.kinds(w, layers) for rule in rules) if k), None) or _kinds(w, layers)
    if w.dense:
        raise UnsupportedArchitectureError(f"{getattr(cfg, 'model_type', None)}: {w.dense[0]}")
    before, head = _outside_specs(w, stacks)
    routed = next((s for k in kinds for s in k if s.get("expert_role") == "routed"), None)
    refused = refused_phases(lm, layers, order)
    desc = {**({"refused_phases": refused} if refused else {}), **({"prefix_tokens": w.prefix} if w.prefix else {}),
        **{k: v for rule in rules for k, v in rule.description_fields().items()},
        "format": FORMAT_VERSION, "model_type": getattr(cfg, "model_type", None), "lm_class": models.lm_class,
        "task": models.task, "hidden_dim": w.hidden, "vocab_size": w.vocab,
        "max_seq_len": config_int(cfg, ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")),
        "experts": {"count": routed["copies"], "top_k": top_k(cfg)} if routed else None,
        "embedding": before, "head": head, "kinds": kinds, "layers": order,
        "probe": {"batch": probe.batch, "seq_len": probe.seq_len, "flops": probe.total_flops,
                  "params": sum(int(p.numel()) for p in lm.parameters())},
        "max_input_len": max_input_len,
    }
    for rule in rules:  # ProphetNet's and Longformer's input limits, refused phases
        rule.finish(desc)
    return desc



def derive_description(hf_config: Any, name: str) -> Dict[str, Any]:
    """Build, probe, read and verify: the description of `hf_config`, or
    UnsupportedArchitectureError (transformers cannot build or run it on meta tensors,
    or the description does not match its parameters and FLOPs exactly). Any other
    failure of the model code or of the reading is a refusal too, never a number."""
    from llm_analysis.exact.derive_check import verify_description
    from llm_analysis.exact.meta_model import config_object, towers_beside_the_language_model
    towers = towers_beside_the_language_model(hf_config, config_object(hf_config))
    if towers:
        raise UnsupportedArchitectureError(towers)
    hf_config, max_input_len = full_attention_path(hf_config)
    try:
        models, probe = _built_and_probed(hf_config, name)
        desc = describe_tree(models, probe, max_input_len)
    except UnsupportedArchitectureError:
        raise
    except Exception as exc:  # the model code or an unforeseen module layout
        raise UnsupportedArchitectureError(
            f"{name}: the module tree could not be read ({type(exc).__name__}: {str(exc).strip()[:300]})") from None
    desc["probe_long"] = _long_probe(models, desc, name)
    verify_description(desc, name)
    return desc


def _long_probe(models: Any, desc: Dict[str, Any], name: str) -> Dict[str, int]:
    """FLOPs of one longer prefill, so that verification also catches behaviour that
    changes with the length (block-sparse attention past a threshold, padding to a
    window): the description must match both."""
    from llm_analysis.exact.flops import model_device
    from llm_analysis.exact.probe import run_probe
    seq_len = min(LONG_PROBE_SEQ_LEN, desc.get("max_seq_len") or LONG_PROBE_SEQ_LEN,
                  desc.get("max_input_len") or LONG_PROBE_SEQ_LEN)
    probe, reason = run_probe(models.lm, 1, seq_len)
    if probe is None:
        raise UnsupportedArchitectureError(
            f"{name}: {models.lm_class} runs 16 tokens but not {seq_len} on {model_device(models.lm)} tensors, so its FLOPs "
            f"cannot be verified at realistic lengths ({reason})")
    return {"batch": 1, "seq_len": seq_len, "flops": probe.total_flops}


def _built_and_probed(hf_config: Any, name: str):
    """The meta model and its probe. bf16 first (fused-expert kernels need it), float32
    when the model's own code insists on it."""
    from llm_analysis.exact.meta_model import build_meta_models
    from llm_analysis.exact.probe import run_probe
    reason = ""
    for dtype in ("bfloat16", "float32"):
        models = build_meta_models(hf_config, with_base=False, dtype=dtype)
        probe, reason = run_probe(models.lm, PROBE_BATCH, PROBE_SEQ_LEN)
        if probe is not None:
            return models, probe
        if "bfloat16" not in reason.lower():
            break
    from llm_analysis.exact.cpu_verify import cpu_probe
    probe, cpu, not_cpu = cpu_probe(models, reason, PROBE_BATCH, PROBE_SEQ_LEN)  # a small model runs for real
    if probe is not None:
        return cpu, probe
    why = missing_top_k(models.config) or not_cpu
    raise UnsupportedArchitectureError(
        f"{name}: {models.lm_class} cannot run a forward pass on meta tensors, so its FLOPs cannot be "
        f"verified ({reason})" + (f": {why}" if why else ""))
