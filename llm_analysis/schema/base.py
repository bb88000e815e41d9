"""The base of every config model: pydantic strictness (unknown fields rejected),
errors re-raised as `llm_analysis.errors.ConfigError` naming field, value and what is
valid, and the sanity limits of numeric fields (options.MAX_*; README 'Input limits')."""

from __future__ import annotations

import math
import weakref
from typing import Any, Callable, Dict, List, Tuple

from pydantic import BaseModel, ConfigDict, ValidationError

import llm_analysis.schema.options as _lim
from llm_analysis.errors import ConfigError

__all__ = ["StrictModel", "format_validation_error", "on_field_assigned", "refresh_fields"]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False, frozen=False)

    def __init__(self, /, *args: Any, **data: Any) -> None:
        # Direct construction (ModelConfig(...)) raises ConfigError too, not pydantic's
        # ValidationError; build_config re-formats it with the file name.
        if args:  # positional, as the mirrored system's dataclasses take them: the fields in declaration order
            names = list(type(self).model_fields)
            if len(args) > len(names):
                raise ConfigError(f"{type(self).__name__} takes at most {len(names)} positional values "
                                  f"({', '.join(names)}); got {len(args)}")
            twice = [n for n in names[:len(args)] if n in data]
            if twice:
                raise ConfigError(f"{type(self).__name__}: {twice[0]} given both by position and by name")
            data = {**dict(zip(names, args)), **data}
        try:
            super().__init__(**data)
        except ValidationError as err:
            exc = ConfigError(format_validation_error(type(self).__name__, err, None, type(self)))
            exc.validation_error = err
            raise exc from None

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        _tell_listeners(self)

    def _positive(self, *fields: str, allow_none: bool = True, lo_open: bool = True) -> None:
        """Each field finite, > 0 (>= 0 with lo_open=False) and within its sanity
        limit (`_LIMITS`, from options.MAX_*; README 'Input limits')."""
        for f in fields:
            v = getattr(self, f)
            if v is None and allow_none:
                continue
            if v is None or not math.isfinite(v) or v < 0 or (lo_open and v == 0):
                raise ValueError(f"field {f!r} = {v!r} must be a finite {'positive' if lo_open else 'non-negative'} "
                                 "number")
            hi = _LIMITS.get(f)
            if hi is not None and v > hi:
                raise ValueError(f"field {f!r} = {v!r} exceeds the sanity limit {hi:g} (README 'Input limits')")

    def to_dict(self) -> Dict[str, Any]:
        return self.model_dump()


_LIMITS: Dict[str, float] = {
    **dict.fromkeys(("num_layers", "moe_first_dense_layers", "moe_layer_freq"), _lim.MAX_NUM_LAYERS),
    **dict.fromkeys(("hidden_dim", "vocab_size", "ffn_embed_dim", "head_dim", "q_lora_rank", "kv_lora_rank",
                     "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_ffn_embed_dim",
                     "moe_shared_expert_ffn_dim", "embedding_dim", "type_vocab_size",
                     "embedding_proj_in_dim", "adapter_dim", "num_adapters"), _lim.MAX_DIM),
    **dict.fromkeys(("n_head", "num_key_value_heads", "num_key_value_groups", "moe_num_experts", "moe_top_k",
                     "moe_num_shared_experts"), _lim.MAX_HEADS),
    "expansion_ratio": _lim.MAX_DIM, "num_norms_per_layer": _lim.MAX_NORMS_PER_LAYER,
    **dict.fromkeys(("max_seq_len", "sliding_window", "num_position_embeddings"), _lim.MAX_SEQ_LEN),
    "mem_per_GPU_in_GB": _lim.MAX_MEMORY_GB,
    **dict.fromkeys(("hbm_bandwidth_in_GB_per_sec", "intra_node_bandwidth_in_GB_per_sec",
                     "inter_node_bandwidth_in_GB_per_sec", "pcie_bandwidth_in_GB_per_sec"),
                    _lim.MAX_BANDWIDTH_GB_PER_S),
    **dict.fromkeys(("peak_fp16_TFLOPS", "peak_i8_TFLOPS", "peak_i4_TFLOPS", "peak_bf16_TFLOPS", "peak_fp8_TFLOPS",
                     "peak_tf32_TFLOPS", "peak_fp32_TFLOPS", "peak_fp4_TFLOPS"), _lim.MAX_TFLOPS),
    **dict.fromkeys(("nvlink_domain_size", "nics_per_node"), _lim.MAX_PARALLEL_SIZE),
    "nic_bandwidth_in_GB_per_sec": _lim.MAX_BANDWIDTH_GB_PER_S,
    **dict.fromkeys(("intra_node_min_message_latency", "inter_node_min_message_latency", "intra_node_hop_latency",
                     "inter_node_hop_latency"), _lim.MAX_SECONDS),
    **dict.fromkeys(("num_gpus_per_node", "fast_link_group_size", "tp_size", "pp_size", "dp_size", "ep_size",
                     "sp_size", "rdp_size", "cp_size", "dp_shard", "dp_replicate", "attention_dp_size",
                     "moe_tp_size", "moe_ep_size", "moe_redundant_experts"), _lim.MAX_PARALLEL_SIZE),
    "quant_group_size": _lim.MAX_DIM, "quant_scale_bits": 64,
}

# Who is told when a field of a configuration object is assigned (`config.num_layers = 40`): an analysis
# keeps operator descriptions and cost models derived from the values it read at construction, and must
# rebuild them, as the mirrored system (which reads its configurations at every call) follows such edits.
# id(config) -> _Watch of that config (entries leave with their configs).
_watches: Dict[int, "_Watch"] = {}


class _Watch:
    """One configuration object's listeners (bound methods, held as a weak reference to their owner, an
    analysis, freed as usual, and the plain function: no callback runs when an owner goes, which at
    interpreter exit could find the weakref module already torn down) and the configurations that hold it
    (a model config holds its vision tower), whose listeners an assignment inside it reaches too."""

    def __init__(self, config: "StrictModel") -> None:
        key, watches = id(config), _watches  # (bound here: the callback must not need this module's globals)
        self.config = weakref.ref(config, lambda _: watches.pop(key, None))
        self.listeners: List[Tuple[weakref.ref, Callable]] = []
        self.holders: List[weakref.ref] = []
        self.watch_inside(config)

    def watch_inside(self, config: "StrictModel") -> None:
        """Make the configurations among `config`'s field values report to it (walked once per object,
        and again when one of its fields is assigned)."""
        for value in config.__dict__.values():
            for item in (value if isinstance(value, (list, tuple)) else (value,)):
                if isinstance(item, StrictModel):
                    holders = _watch_of(item).holders
                    if not any(h is self.config for h in holders):
                        holders.append(self.config)


def _watch_of(config: "StrictModel") -> _Watch:
    watch = _watches.get(id(config))
    if watch is None or watch.config() is not config:  # (an id is reused only after its object is freed)
        watch = _watches[id(config)] = _Watch(config)
    return watch


def on_field_assigned(config: "StrictModel", listener: Callable[[], None]) -> None:
    """Call `listener()` (a bound method) after each assignment to a field of `config` or of a
    configuration inside it. In-place changes to a list or dict field are not assignments: they are
    not seen (assign a new value instead)."""
    listeners = _watch_of(config).listeners
    if len(listeners) >= 8 and (len(listeners) & (len(listeners) - 1)) == 0:  # at 8, 16, 32...: drop the dead
        listeners[:] = [(owner, f) for owner, f in listeners if owner() is not None]
    listeners.append((weakref.ref(listener.__self__), listener.__func__))


def _tell_listeners(config: "StrictModel") -> None:
    watch = _watches.get(id(config))
    if watch is None or watch.config() is not config:
        return
    watch.watch_inside(config)  # (a configuration just assigned to one of its fields reports to it from now on)
    for owner_ref, function in list(watch.listeners):
        owner = owner_ref()
        if owner is not None:
            function(owner)
    for holder in list(watch.holders):
        outer = holder()
        if outer is not None:
            _tell_listeners(outer)


def refresh_fields(config: "StrictModel") -> None:
    """Validate `config` as its construction from the fields given to it (its model_fields_set: those passed
    or assigned) would (ConfigError naming the field and value), and fill the fields its validators derive
    from them again (ParallelismConfig's sp_size and expert split from tp_size): assignments are not
    validated when made (validate_assignment=False, so that several can be made in turn), and a derived
    field kept from before would contradict an assigned one (tp_size 2 -> 4 with moe_tp_size still 2)."""
    fresh = type(config)(**{name: getattr(config, name) for name in config.model_fields_set})
    for name in type(config).model_fields:
        if name not in config.model_fields_set:
            config.__dict__[name] = getattr(fresh, name)  # (not an assignment: nobody is told, nothing is given)


def format_validation_error(cls_name: str, err: ValidationError, source: str | None,
                             cls: Any = None) -> str:
    where = f" in {source}" if source else ""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(config)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            valid = ", ".join(cls.model_fields) if cls is not None else "(see the class)"
            msg = f"unknown field {loc!r} (value {e.get('input')!r}); valid fields are: {valid}"
        elif e["type"] == "missing":
            msg = f"required field {loc!r} is missing"
        elif loc != "(config)":
            msg = f"field {loc!r} = {e.get('input')!r}: {msg}"
        lines.append(msg)
    return f"Invalid {cls_name}{where}: " + "; ".join(lines)
