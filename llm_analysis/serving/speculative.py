"""Speculative decoding in serve(): a draft proposes tokens, one target step verifies them.

`serve(..., speculative={...})`: "method" "mtp" (a one-layer draft on the target's hidden states:
DeepSeek's multi-token prediction, EAGLE heads) or "draft_model" (a separate small model, "draft_model":
a catalogue name, Hub id or ModelConfig, on the target's GPUs and layout); "draft_length" k, the tokens
a step verifies per request (TensorRT-LLM's max_draft_len + 1, SGLang's speculative_num_draft_tokens);
"mean_accepted_length" L in [1, k], the tokens a step emits per request, or "acceptance_rate" a, each
draft accepted with probability a if the one before was: L = (1 - a^k) / (1 - a).

A decode step runs the draft k - 1 times and the target once over k tokens per request (token operators
over D x k tokens, LM head over all, attention with k queries per sequence). It emits L tokens a request,
so decode-only steps are timed as step / L, and the prefill a step carries keeps its full time. Draft
costs and memory: "mtp" one of the target's layers (its total over its layer count) and the LM head;
"draft_model" a decode step, the weights and the KV cache of the draft model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Dict, Optional

from llm_analysis.errors import ConfigError
from llm_analysis.model import LayerDescriber
from llm_analysis.schema.options import choice, integer, number
from llm_analysis.serving.step_time import chunk_totals

METHODS = ("mtp", "draft_model")
_KEYS = ("method", "draft_length", "mean_accepted_length", "acceptance_rate", "draft_model")
MAX_DRAFT_LENGTH = 64


def _draft_model_config(value):
    from llm_analysis.config import ModelConfig, get_model_config_by_name
    if isinstance(value, ModelConfig):
        return value
    if isinstance(value, str):
        return get_model_config_by_name(value)
    raise ConfigError(f"speculative['draft_model'] = {value!r} must be a model name or a ModelConfig")


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding as serve() runs it (see the module docstring)."""

    method: str
    draft_length: int  # k: tokens verified per request per step
    mean_accepted_length: float  # L: tokens emitted per request per step
    draft_model: Any = None  # ModelConfig of "draft_model"

    def timer(self, base, analysis, engine) -> "SpeculativeStepTimer":
        """`base` (a StepTimer) with each decode step verifying k tokens after the draft's passes."""
        draft = None
        if self.method == "draft_model":
            from llm_analysis.serving.step_time import step_timer
            other = self.draft_analysis(analysis)
            draft = step_timer(other, other.describer_for(engine.kv_cache_bytes), engine).costs
        return SpeculativeStepTimer(base, self, analysis.model_config.num_layers, draft)

    def draft_analysis(self, analysis):
        """The target's analysis with the draft model in its place (same GPUs, dtype and layout), kept with the
        analysis' describer; the draft is a catalogue model, counted by the stock describer (not a subclass')."""
        def build():
            other = copy.copy(analysis)
            other.describer_class = LayerDescriber
            try:
                other.update_model_config(self.draft_model)
            except ConfigError as err:
                raise ConfigError(f"speculative['draft_model'] = {self.draft_model.name!r} cannot run on the "
                                  f"target's layout: {err}") from None
            return other

        return analysis.describer.memoized(("speculative_draft", self.draft_model.model_dump_json()), build)

    def draft_weight_bytes_per_gpu(self, analysis, target_weight_bytes_per_gpu: Optional[float] = None) -> float:
        """The draft's weights on each GPU: a draft model's, or one of the target's layers (MTP) as the worker layout
        holds them (`target_weight_bytes_per_gpu`; None: `analysis`' own): off the attention replica alone, the
        MTP layer of DeepSeek-R1 over attention-DP 8 x EP 8 had been 11.0 GB a GPU, experts unsplit, not 1.7 GB."""
        if self.method == "draft_model":
            return self.draft_analysis(analysis).get_weight_memory_per_gpu()
        target = analysis.get_weight_memory_per_gpu() if target_weight_bytes_per_gpu is None \
            else target_weight_bytes_per_gpu
        return target / analysis.model_config.num_layers

    def draft_kv_bytes_per_token_per_gpu(self, analysis, kv_cache_bytes: float) -> float:
        source = self.draft_analysis(analysis) if self.method == "draft_model" else analysis
        per_token = (source.get_memory_kv_cache_per_gpu(1, 2, kv_cache_bytes)
                     - source.get_memory_kv_cache_per_gpu(1, 1, kv_cache_bytes))
        return per_token if self.method == "draft_model" else per_token / analysis.model_config.num_layers

    @property
    def key(self) -> tuple:
        """What distinguishes this speculation in kept results (saturation rates)."""
        return (self.method, self.draft_length, self.mean_accepted_length,
                self.draft_model.name if self.draft_model is not None else None)

    def entries(self) -> Dict[str, Any]:
        return {"speculative_method": self.method, "speculative_draft_length": self.draft_length,
                "speculative_mean_accepted_length": self.mean_accepted_length}

    def note(self) -> str:
        """What serve()'s answer assumed of the speculation, in words (its notes)."""
        k, L = self.draft_length, self.mean_accepted_length
        draft = ("one of the target's layers and its LM head (multi-token prediction)" if self.method == "mtp"
                 else f"the draft model {self.draft_model.name}")
        return (f"speculative decoding ({self.method}): each decode step drafts {k - 1} token(s) per request with "
                f"{draft} and verifies {k}; it emits {L:.2f} tokens per request on average (given, not modelled: "
                f"the acceptance is the workload's), so a decode step counts 1/{L:.2f} of its time per output "
                "token; the draft's weights and KV cache take GPU memory beside the target's")


class SpeculativeStepTimer:
    """Step times under speculative decoding, in tokens emitted: a decode-only step takes (verify + draft) / L,
    prefill chunks add their time in full (the `StepTimer` interface)."""

    def __init__(self, base, spec: Speculative, num_layers: int, draft_costs=None):
        self.base, self.spec, self.num_layers, self.draft_costs = base, spec, num_layers, draft_costs
        self.costs, self.engine = base.costs, base.engine
        self.memo_key = ("speculative",) + spec.key  # its saturation rate differs from the base timer's

    @property
    def tokens_per_step(self) -> float:
        """Tokens a decoder gains per verify step (L): a step lasts L of `step_s`'s per-token time."""
        return self.spec.mean_accepted_length

    @property
    def budget_tokens_per_decoder(self) -> float:
        """A verify step scores k tokens of each decoding request: k of the step's token budget."""
        return float(self.spec.draft_length)

    def _draft_s(self, graph: bool, decoders: float, context: float) -> float:
        """The draft's k - 1 passes over `decoders` requests at `context` tokens."""
        passes = self.spec.draft_length - 1
        if passes <= 0 or decoders <= 0:
            return 0.0
        if self.draft_costs is not None:
            token, head = self.draft_costs.token_and_head_s(graph, decoders)
            one = token + head + self.draft_costs.decode_attention_s(graph, decoders, context)
        else:  # one of the target's layers and its LM head
            c = self.costs
            one = (c.token_s(graph, decoders) + c.decode_attention_s(graph, decoders, context)) / self.num_layers \
                + c.head_s(graph, decoders)
        return passes * one

    def _verify_s(self, decoders: float, context: float, chunks, sampled_chunks: float) -> float:
        """One target step verifying k tokens for each of `decoders` requests, with prefill `chunks`."""
        k, c, e = self.spec.draft_length, self.costs, self.engine
        prefill, sequences = chunk_totals(chunks)
        tokens = decoders * k + prefill
        graph = e.uses_graphs(decoders + prefill, bool(chunks))
        t = c.token_s(graph, tokens) + c.head_s(graph, decoders * k + sampled_chunks)
        t += c.decode_attention_s(graph, decoders, context, k)
        if chunks:
            t += c.chunks_attention_s(graph, chunks) + c.prefill_form_s(graph, prefill)  # (the step's prompts at once)
        t += self._draft_s(graph, decoders, context)
        t += e.step_overhead_per_layer_s * self.num_layers  # the target's layers (the draft's passes: not counted)
        return e.step_with_host_s(t, decoders + sequences)

    def step_s(self, decoders: float, decode_context_sum: float, chunks=(), sampled: float = None) -> float:
        if decoders <= 0:
            return self.base.step_s(decoders, decode_context_sum, chunks, sampled)
        context = decode_context_sum / decoders
        sampled_chunks = chunk_totals(chunks)[1] if sampled is None else max(sampled - decoders, 0.0)
        decode_only = self._verify_s(decoders, context, (), 0.0)
        whole = self._verify_s(decoders, context, chunks, sampled_chunks) if chunks else decode_only
        # the step emits L tokens per request: its decode part counts 1 / L per token; the prefill part whole
        return whole - decode_only * (1.0 - 1.0 / self.spec.mean_accepted_length)


def speculative_decoding(analysis, value: Optional[Dict[str, Any]]) -> Optional[Speculative]:
    """The checked `speculative=` argument of serve() (None: no speculation); one ConfigError naming
    the key, the value and what is valid."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f"speculative = {value!r} must be a dict: {{'method': 'mtp' | 'draft_model', "
                          "'draft_length': k, 'mean_accepted_length': L (or 'acceptance_rate': a), "
                          "'draft_model': name (draft_model only)}")
    unknown = [k for k in value if k not in _KEYS]
    if unknown:
        raise ConfigError(f"speculative key {unknown[0]!r} is not known; valid: {', '.join(_KEYS)}")
    method = value.get("method", "mtp")
    try:  # (an array compared with `in` raises; choice compares strings and numbers only)
        method = choice(method, "speculative['method']", METHODS)
    except ConfigError:
        raise ConfigError(f"speculative['method'] = {method!r} is not known; valid: {', '.join(METHODS)}") from None
    # the numbers go through the package's coercers: numpy's integers and floats are numbers (np.int64(3) was
    # refused as no whole number), and a huge int is refused, not an OverflowError
    k = value.get("draft_length")
    try:
        k = integer(k, "speculative['draft_length']", 2, MAX_DRAFT_LENGTH)
    except ConfigError:
        raise ConfigError(f"speculative['draft_length'] = {k!r} must be a whole number of tokens verified per step, "
                          f"2..{MAX_DRAFT_LENGTH} (the last accepted token and at least one drafted)") from None
    has_length, has_rate = "mean_accepted_length" in value, "acceptance_rate" in value
    if has_length == has_rate:
        raise ConfigError("speculative: give exactly one of 'mean_accepted_length' (tokens emitted per step, in "
                          f"[1, draft_length = {k}]) and 'acceptance_rate' (each drafted token's, in [0, 1])")
    if has_rate:
        given = value["acceptance_rate"]
        try:
            a = number(given, "speculative['acceptance_rate']", 0.0, 1.0, lo_open=False)
        except ConfigError:
            raise ConfigError(f"speculative['acceptance_rate'] = {given!r} must be a number in [0, 1]") from None
        length = float(k) if a == 1 else (1 - a ** k) / (1 - a)
    else:
        given = value["mean_accepted_length"]
        try:
            length = number(given, "speculative['mean_accepted_length']", 1.0, float(k), lo_open=False)
        except ConfigError:
            raise ConfigError(f"speculative['mean_accepted_length'] = {given!r} must be in [1, draft_length = {k}]: "
                              "a step emits at least the target's own token and at most every verified one") from None
    draft = None
    if method == "draft_model":
        if "draft_model" not in value:
            raise ConfigError("speculative['method'] = 'draft_model' needs speculative['draft_model']: a catalogue "
                              "name, Hub id or ModelConfig of the draft")
        draft = _draft_model_config(value["draft_model"])
        # the draft proposes token ids the target verifies: both must share one vocabulary, and the engines check
        # the sizes are equal (vLLM refuses a draft of another vocab_size: vllm-project/vllm#5203, #7252; a
        # padded-vocabulary draft of the same family needs its embedding padded to the target's first)
        target = analysis.model_config
        if draft.vocab_size != target.vocab_size:
            raise ConfigError(f"speculative['draft_model'] = {draft.name!r} has vocab_size = {draft.vocab_size}, the "
                              f"target {target.name!r} {target.vocab_size}: a draft must share the target's "
                              f"vocabulary (the engines refuse other sizes); valid: a draft model with vocab_size = "
                              f"{target.vocab_size} (of the target's family)")
    elif "draft_model" in value:
        raise ConfigError("speculative['draft_model'] is given but method = 'mtp' drafts with a layer of the target; "
                          "use method = 'draft_model' or drop the key")
    return Speculative(method, k, length, draft)


__all__ = ["METHODS", "Speculative", "SpeculativeStepTimer", "speculative_decoding"]
