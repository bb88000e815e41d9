"""The vocabulary of the Hub family table (`hub/families/`) and the interpreter that turns a row and a
config into ModelConfig fields.

A row maps ModelConfig field names to a constant (a fixed flag of the family: `"rmsnorm"`, `True`, `2`)
or a reader:
- `Req(*keys)`: an integer the config must have (the first present key wins);
- `Opt(*keys, default=None)`: an optional integer; `Flag(*keys, default=...)`: a boolean;
- `Act(*keys, default=...)`: an activation name, normalised;
- `Same(field, times=1, plus=0)`: derived from a field read earlier in the row;
- `Either(reader, reader)`: the first reader's value unless it is empty;
- `When(flag, then, otherwise=None)`: a constant chosen by a boolean reader;
- `Sum(*fields)`: the sum of earlier fields (None unless all are set); `Total(key)`: the sum of a list
  the config must have; `Quotient(field, by)`: `f[field] // f[by]`.
A tuple of field names maps to a reader returning a tuple (e.g. `Window`: `sliding_window` and
`layer_types`). Fields are read in row order; reads that miss a required key are collected and reported
together by the caller. The row's `checks` run before anything is read, its `steps` (named hooks and
`MoeRule`s) after, each editing the fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Mapping, Optional, Tuple

from llm_analysis.hub.errors import UnmappableConfig, not_modelled
from llm_analysis.hub.source import Fields, Src, activation, attention_layout, moe_layout

__all__ = ["Req", "Opt", "Flag", "Act", "Same", "Either", "When", "Sum", "Total", "Quotient", "Window", "Refuse",
           "NotModelled", "MoeRule", "Family", "read_family", "read_masked_lm_head"]

Step = Callable[[Src, Fields, str], None]


class Reader:
    """Reads one value (or a tuple of values) from the config; see the module docstring."""

    def read(self, src: Src, f: Fields, what: str) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


def _value(spec: Any, src: Src, f: Fields, what: str) -> Any:
    return spec.read(src, f, what) if isinstance(spec, Reader) else spec


class _Keys(Reader):
    """Reads the first present key among `keys`; `default` when none is (Req: required)."""

    def __init__(self, *keys: str, default: Any = None):
        self.keys, self.default = keys, default

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.keys + ((self.default,) if self.default is not None else ())}"


class Req(_Keys):
    def read(self, src, f, what):
        return src.req_int(*self.keys)


class Opt(_Keys):
    def read(self, src, f, what):
        return src.opt_int(*self.keys, default=self.default)


class Flag(_Keys):
    def read(self, src, f, what):
        return bool(src.get(*self.keys, default=self.default))


class Act(_Keys):
    def read(self, src, f, what):
        return activation(src.get(*self.keys, default=self.default), self.keys[0])


@dataclass(frozen=True)
class Same(Reader):
    """`times * f[field] + plus`, or None when that field is empty."""
    field: str
    times: int = 1
    plus: int = 0

    def read(self, src, f, what):
        v = f.get(self.field)
        return v * self.times + self.plus if v else None


@dataclass(frozen=True)
class Either(Reader):
    first: Any
    second: Any

    def read(self, src, f, what):
        return _value(self.first, src, f, what) or _value(self.second, src, f, what)


@dataclass(frozen=True)
class When(Reader):
    flag: Reader
    then: Any
    otherwise: Any = None

    def read(self, src, f, what):
        return self.then if self.flag.read(src, f, what) else self.otherwise


class Sum(Reader):
    def __init__(self, *fields: str):
        self.fields = fields

    def read(self, src, f, what):
        values = [f.get(k) for k in self.fields]
        return sum(values) if all(values) else None


@dataclass(frozen=True)
class Quotient(Reader):
    field: str
    by: str

    def read(self, src, f, what):
        a, b = f.get(self.field), f.get(self.by)
        return a // b if a and b else None


@dataclass(frozen=True)
class Total(Reader):
    """The sum of the integer list under `key` (TAPAS: one token-type table per entry)."""
    key: str

    def read(self, src, f, what):
        values = src.get(self.key, default=None)
        if values is None:
            src.missing.append(self.key)
            return None
        if not isinstance(values, (list, tuple)) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            raise UnmappableConfig(f"{what}: {self.key}={values!r} must be a list of non-negative "
                                   "integers")
        return sum(values)


@dataclass(frozen=True)
class Window(Reader):
    """(sliding_window, layer_types) from the config's per-layer kinds and window size. `types_key` None: the
    family ignores per-layer kinds (every layer slides when a window is set, as HF Mistral/Phi-3/Mixtral do)."""
    types_key: Optional[str] = "layer_types"
    window_key: str = "sliding_window"
    default_window: Optional[int] = None

    def read(self, src, f, what):
        types = src.get(self.types_key, default=None) if self.types_key else None
        return attention_layout(types, src.get(self.window_key, default=self.default_window),
                                f.get("num_layers"), what)


@dataclass(frozen=True)
class Refuse:
    """A check: refuse a config whose `key` (default `default`) is not in `allowed`. `unsupported`: the value
    names a feature of a well-formed config ModelConfig does not describe (UnsupportedArchitecture, with the
    [exact] hint) rather than a config the row cannot read (UnmappableConfig)."""
    key: str
    allowed: Tuple[Any, ...]
    default: Any
    reason: str
    as_bool: bool = False
    unsupported: bool = False

    def __call__(self, src: Src, f: Fields, what: str) -> None:
        v = src.get(self.key, default=self.default)
        v = bool(v) if self.as_bool else v
        if v not in self.allowed:
            message = f"{what}: {self.key}={v!r} ({self.reason}) cannot be described by ModelConfig"
            raise not_modelled(message) if self.unsupported else UnmappableConfig(message)


@dataclass(frozen=True)
class NotModelled:
    """A check that refuses every config of a family, naming what ModelConfig lacks."""
    reason: str

    def __call__(self, src: Src, f: Fields, what: str) -> None:
        raise not_modelled(f"{what}: {self.reason}")


def _every_layer(src: Src, n: int) -> List[int]:
    return list(range(n))


def _sparse_step_layers(src: Src, n: int) -> List[int]:
    """Qwen-MoE: every `decoder_sparse_step`-th layer (1-based) except `mlp_only_layers`."""
    step = src.opt_int("decoder_sparse_step", default=1) or 1
    only = set(src.get("mlp_only_layers", default=[]) or [])
    return [i for i in range(n) if i not in only and (i + 1) % step == 0]


def _dense_first_layers(src: Src, n: int) -> List[int]:
    """MoE iff layer_idx >= first_k_dense_replace, as transformers' classes build these families
    (DeepseekV2/V3DecoderLayer, Glm4MoeDecoderLayer). DeepSeek's reference code and vLLM also require
    layer_idx % moe_layer_freq == 0, which transformers never reads: a config with moe_layer_freq != 1
    describes two different models, so it is refused (every published checkpoint has 1)."""
    first_k = src.opt_int("first_k_dense_replace", default=0) or 0
    freq = src.opt_int("moe_layer_freq", default=1) or 1
    if freq != 1:
        raise ValueError(
            f"moe_layer_freq = {freq}. transformers' class builds a MoE block on "
            f"every layer from first_k_dense_replace = {first_k} on and ignores moe_layer_freq, while DeepSeek's "
            "reference code and vLLM make only every moe_layer_freq-th layer MoE: the two count different models. "
            "Set moe_layer_freq = 1 (as every published DeepSeek / GLM checkpoint has)")
    return [i for i in range(n) if i >= first_k]


def _listed_layers(src: Src, n: int) -> List[int]:
    """`mlp_layer_types`: "sparse" or "dense" per layer (GLM-4-MoE-Lite, EXAONE-MoE,
    HY-V3, Cohere2-MoE); configs without the list derive it from first_k_dense_replace."""
    kinds = src.get("mlp_layer_types", default=None)
    if kinds is None:
        return _dense_first_layers(src, n)
    odd = sorted({str(k) for k in kinds} - {"sparse", "dense"})
    if odd or len(kinds) != n:
        raise UnmappableConfig(f"mlp_layer_types = {list(kinds)!r}: one 'sparse' or 'dense' per "
                               f"layer ({n} layers) is what ModelConfig describes")
    return [i for i, k in enumerate(kinds) if k == "sparse"]


def _interval_range_layers(src: Src, n: int) -> List[int]:
    """ERNIE 4.5 MoE (Ernie4_5_MoeDecoderLayer): MoE iff (layer_idx + 1) %
    moe_layer_interval == 0 and moe_layer_start_index <= layer_idx <= moe_layer_end_index."""
    start = src.opt_int("moe_layer_start_index", default=0) or 0
    end = src.opt_int("moe_layer_end_index", default=n - 1)
    end = n - 1 if end is None or end < 0 else end
    every = src.opt_int("moe_layer_interval", default=1) or 1
    return [i for i in range(n) if (i + 1) % every == 0 and start <= i <= end]


#: which layers hold routed experts, by rule name: (src, num_layers) -> layer indices
MOE_LAYER_RULES: Mapping[str, Callable[[Src, int], List[int]]] = {
    "all": _every_layer, "sparse_step": _sparse_step_layers, "dense_first": _dense_first_layers,
    "listed": _listed_layers, "interval_range": _interval_range_layers,
}


@dataclass(frozen=True)
class MoeRule:
    """A step: routed experts (count, top-k, which layers, width) and shared experts. `top_k_first`: the
    top-k key is read (and required) even for a dense config, as the family's HF code does."""
    experts: Reader
    top_k: Reader
    layers: str = "all"
    width: Any = None  # per routed expert (moe_ffn_embed_dim); None: not set
    shared_count: Any = None  # shared experts; None: one when shared_width is set
    shared_width: Any = None
    shared_gate: bool = False
    top_k_first: bool = True

    def __call__(self, src: Src, f: Fields, what: str) -> None:
        n = f.get("num_layers")
        experts = self.experts.read(src, f, what)
        top_k = self.top_k.read(src, f, what) if self.top_k_first else None
        if isinstance(experts, (int, float)) and experts < 0:  # (0 or 1 expert: a dense config of a MoE family)
            raise UnmappableConfig(f"{what}: the number of routed experts is {experts!r}; valid: a whole number "
                                   ">= 2 for a mixture of experts, or 0 / 1 / no key for a dense model")
        if not experts or experts <= 1:
            return
        if not self.top_k_first:
            top_k = self.top_k.read(src, f, what)
        if top_k is not None and not (isinstance(top_k, int) and 1 <= top_k <= experts):
            raise UnmappableConfig(f"{what}: the experts each token is routed to (top-k) is {top_k!r} of {experts} "
                              f"experts; valid: a whole number from 1 to {experts}")
        if n is not None:
            try:
                layers = MOE_LAYER_RULES[self.layers](src, n)
            except ValueError as err:  # a rule's refusal of the config's layer pattern
                raise UnmappableConfig(f"Cannot map the config of {what}: {err}") from None
            first, freq = moe_layout(layers, n, what)
            f.update(moe_num_experts=experts, moe_top_k=top_k or 1, moe_first_dense_layers=first,
                     moe_layer_freq=freq)
        if self.width is not None:
            f["moe_ffn_embed_dim"] = _value(self.width, src, f, what)
        self._shared(src, f, what)

    def _shared(self, src: Src, f: Fields, what: str) -> None:
        width = _value(self.shared_width, src, f, what)
        count = _value(self.shared_count, src, f, what) if self.shared_count is not None else 1
        if count and width:
            f.update(moe_num_shared_experts=count, moe_shared_expert_ffn_dim=width)
            if self.shared_gate:
                f["moe_shared_expert_gate"] = True


@dataclass(frozen=True)
class Family:
    """One row of the family table: fields in reading order, checks run before, steps after.
    `ignores`: shape keys hub/guards.py refuses in general but this family's code never reads (LUKE's
    add_cross_attention). `masked_lm_head`: for an encoder, the fields of its `*ForMaskedLM` class when
    `architectures` names that class; None: that class is refused (hub/model_class.py)."""
    fields: Mapping[Any, Any]
    checks: Tuple[Step, ...] = ()
    steps: Tuple[Step, ...] = ()
    ignores: Tuple[str, ...] = ()
    masked_lm_head: Optional[Mapping[str, Any]] = None


def read_family(family: Family, src: Src, what: str) -> Fields:
    """ModelConfig fields of a config of this family (name/source/model_type added later)."""
    for check in family.checks:
        check(src, {}, what)
    f: Fields = {}
    for key, spec in family.fields.items():
        value = _value(spec, src, f, what)
        if isinstance(key, tuple):
            f.update(zip(key, value))
        else:
            f[key] = value
    for step in family.steps:
        step(src, f, what)
    return f


def read_masked_lm_head(family: Family, src: Src, f: Fields, what: str) -> None:
    """Add the family's masked-LM head fields (its `masked_lm_head` row) to `f`."""
    for key, spec in (family.masked_lm_head or {}).items():
        f[key] = _value(spec, src, f, what)
