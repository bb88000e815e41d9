"""The state a recurrent sequence mixer keeps per sequence, shared by the mixer families.

A recurrent mixer (RWKV, Griffin, MiniMax, Mamba, LFM, KDA, xLSTM, ZAYA's convolutions,
Inkling's short convolutions) keeps a state per sequence instead of a KV cache and owns
parameters that are no projection (decays, token-shift mixes). Its family describes it
with specs built here:

* `param`: element-wise parameters (no FLOPs FlopCounterMode counts);
* `row_flops`: matmuls measured per token (block-diagonal gates, depth attention);
* `state`: a spec whose `state` field is a `RecurrentState`: the state one sequence keeps
  in this module between decode steps (`parts`: name, elements, kept in float32), a
  `decode_refusal` when a decode step cannot be described (the decode phase is refused,
  prefill and training are not), and the `recurrence` whose matmuls FlopCounterMode
  counts (None for element-wise recurrences: 0 FLOPs);
* `conv` with `causal_outputs`: a padded causal depthwise convolution run by the mixer.

Operators of those specs (torch-free), as model/mixers.py files the table path's mixers:
* the state spec is the recurrence itself, a "scan" operator of the recurrence's FLOPs; it
  reads its state when the phase continues a context and writes it after every inference
  pass (training keeps none); its state read plays the KV cache's part;
* state bytes per sequence: each part at the KV-cache dtype, except the parts the reference
  implementation keeps in float32 (4 bytes whatever the cache dtype);
* a padded causal convolution computes L + pad_outputs outputs per sequence in a prefill
  (eager) or L (serving kernels); a decode step computes `decode_outputs` (eager: 0 when
  transformers multiplies and sums element-wise) or 1 (serving).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.model import Operator, Phase

MIXER_GROUP = "attention"  # the layer's sequence-mixing block, as model/mixers.py files it
FLOAT32_BYTES = 4.0


@dataclass(frozen=True)
class StatePart:
    name: str
    elements: int
    float32: bool  # kept in float32 whatever the cache dtype


class Recurrence:
    """The matmuls of a recurrence that FlopCounterMode counts, per layer call."""

    def flops(self, phase: Phase, serving: bool) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class RecurrentState:
    parts: Tuple[StatePart, ...]
    source: str  # the paper or implementation the state follows
    decode_refusal: Optional[str] = None
    recurrence: Optional[Recurrence] = None


def causal_conv_macs(phase: Phase, channels: int, kernel: int, serving: bool) -> int:
    """Per sequence, a causal depthwise convolution run as a function: eager, L + k - 1
    outputs (padding k - 1 on both sides); a decode step convolves the k cached columns and
    the new one (2 outputs); kernels 1 per token."""
    if phase.past_len > 0 and phase.q_len != 1:
        raise UnsupportedArchitectureError("a causal convolution (Mamba, short convolution) continuing a context "
                                           "with several new tokens per sequence (chunked prefill) is not modelled")
    if serving:
        outputs = phase.q_len
    else:
        outputs = 2 if phase.past_len > 0 else phase.q_len + kernel - 1
    return channels * kernel * outputs


@dataclass(frozen=True)
class ShortConvolution(Recurrence):
    """A gated short convolution (LFM) or a short convolution at any site of a layer
    (Inkling): the causal depthwise convolution is its only matmul."""

    channels: int
    kernel: int

    def flops(self, phase: Phase, serving: bool) -> float:
        return 2.0 * phase.batch * causal_conv_macs(phase, self.channels, self.kernel, serving)


@dataclass(frozen=True)
class CausalConvOutputs:
    """Outputs per sequence of a padded causal convolution the mixer runs as a module."""

    pad_outputs: int  # outputs beyond one per token in a prefill (eager)
    decode_outputs: int  # outputs of an eager decode step (0: an element-wise multiply-and-sum)

    def outputs(self, phase: Phase, serving: bool) -> int:
        """Outputs per channel over the whole phase (all sequences)."""
        if phase.past_len > 0 and phase.q_len == 1:  # a decode step
            return phase.batch * (1 if serving else self.decode_outputs)
        return phase.tokens if serving else phase.batch * (phase.q_len + self.pad_outputs)


# ------------------------------------------------------------------ specs
def mixer_spec(name: str, op: str, params: int, calls: int, **extra: Any) -> Dict[str, Any]:
    """A spec with the fields every spec of a derived description carries."""
    s = {"name": name, "op": op, "params": int(params), "tokens": "all", "calls": int(calls), "group": MIXER_GROUP,
         "in": 0, "out": 0, "bias": False, "copies": 1, "expert_role": None, "tp": "unknown"}
    s.update(extra)
    return s


def elementwise_specs(rel: str, fresh: Dict[str, int], calls: int, group: str = MIXER_GROUP
                      ) -> List[Dict[str, Any]]:
    """One `param` spec per new parameter of the module (no FLOPs FlopCounterMode counts)."""
    return [mixer_spec(f"{rel}.{n}", "param", v, calls, group=group) for n, v in fresh.items()]


def state_spec(rel: str, calls: int, state: RecurrentState, group: str = MIXER_GROUP) -> Dict[str, Any]:
    """The spec of the state one sequence keeps in this module between decode steps."""
    return mixer_spec(f"{rel}.state", "state", 0, calls, group=group, state=state)


def padded_conv_spec(rel: str, module: Any, fresh: Dict[str, int], calls: int, padding: int,
                     outputs: CausalConvOutputs) -> Dict[str, Any]:
    """A causal convolution module (nn.Conv1d) the mixer runs with its own padding."""
    return mixer_spec(rel, "conv", sum(fresh.values()), calls, **{
        "in": int(module.in_channels), "out": int(module.out_channels), "bias": module.bias is not None,
        "kernel": int(module.kernel_size[0]), "conv_groups": int(module.groups), "padding": padding,
        "causal_outputs": outputs})


# -------------------------------------------------------------- operators
def state_bytes_per_seq(specs: List[Dict[str, Any]], kv_bytes: float) -> float:
    """Bytes of state one sequence keeps in one layer of this kind (whole layer, one GPU:
    the exact path refuses tp_size > 1 for state-keeping layers)."""
    return sum(part.elements * (FLOAT32_BYTES if part.float32 else kv_bytes)
               for s in specs if s["op"] == "state" for part in s["state"].parts)


def state_op(phase: Phase, s: Dict[str, Any], kv_bytes: float, serving: bool = False) -> Operator:
    state: RecurrentState = s["state"]
    if phase.past_len > 0 and state.decode_refusal:
        raise UnsupportedArchitectureError(f"{s['name']}: a decode step is not modelled ({state.decode_refusal})")
    flops = state.recurrence.flops(phase, serving) * s["calls"] if state.recurrence else 0.0
    per_seq = state_bytes_per_seq([s], kv_bytes) * s["calls"]
    read = phase.batch * per_seq if phase.past_len > 0 else 0.0
    written = phase.batch * per_seq if phase.name != "train" else 0.0
    parts = ", ".join(f"{p.name} {p.elements}{' fp32' if p.float32 else ''}" for p in state.parts)
    return Operator(name=s["name"], group=s["group"], kind="scan", flops=flops, flops_per_gpu=flops,
                    bytes_read_per_gpu=read,
                    bytes_written_per_gpu=written, kv_cache_bytes_read_per_gpu=read,
                    shapes=f"recurrence ({state.source}); state per sequence: {parts}")


def conv_outputs(phase: Phase, s: Dict[str, Any], serving: bool, rows: int) -> int:
    """Outputs per channel of a convolution spec over the whole phase (all sequences);
    `rows` (one output per row it sees) for a convolution no mixer pads."""
    outputs: Optional[CausalConvOutputs] = s.get("causal_outputs")
    return rows if outputs is None else outputs.outputs(phase, serving)
