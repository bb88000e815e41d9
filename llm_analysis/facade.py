"""LLMAnalysis: the facade users call. It holds the configuration and two
collaborators built from it, the operator description (`describer`, model/) and the
cost model (`cost_model`, cost/), and delegates every method to the folder that owns
its concept: argument checks to schema/options.py, counting conventions and variants
to model/conventions.py, parameters / FLOPs / memory / times to quantities/, the
orchestrators to inference/ and training/, output to report/.

Kept with the names and defaults of the mirrored system's API.
"""

from __future__ import annotations

import copy
from functools import cached_property
from typing import Any, Dict, List, Optional, Tuple, Union

from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from llm_analysis.catalogue.model_lookup import configs_by_name
from llm_analysis.units import BYTES_FP32
from llm_analysis.cost import CostModel, RooflineCostModel
from llm_analysis.cost.calibrated import resolve_perf_model
from llm_analysis.cost.profiles import Profile
import llm_analysis.cost.choice as _perf
from llm_analysis.model import Conventions, LayerDescriber, Operator
from llm_analysis.model.conventions import ConventionChoice, Variants
from llm_analysis.model.subclass_overrides import warn_unread_overrides
from llm_analysis.model.vision_tower import image_entries, image_variant, with_request_images
from llm_analysis.cost.precision import check_dtype_rate
from llm_analysis.cost.roofline import check_achieved_rates, peak_tflops_for_dtype
from llm_analysis.schema.edits import ConfigEdits, derived
from llm_analysis.schema.dtype import SIGNATURE_DEFAULT_DTYPE
from llm_analysis.schema.parallelism import SIGNATURE_DEFAULT_PARALLELISM, check_expert_split, warn_worker_layout_unread
from llm_analysis.schema.options import (MAX_PARALLEL_SIZE, ActivationRecomputation, DSZeRO, efficiency,
                                         efficiency_beside_rate, instance, integer_or_default, keep_number,
                                         owned_instance)
import llm_analysis.quantities.activations as _act
from llm_analysis.quantities.arguments import (convention_name, count, flag,
                                               output_dir as checked_output_dir, plain, plain_values, text, unused)
import llm_analysis.quantities.flops as _flops
from llm_analysis.quantities.hardware import achieved_link_GB_per_s
import llm_analysis.quantities.latency as _lat
import llm_analysis.quantities.memory as _mem
import llm_analysis.quantities.params as _params
import llm_analysis.quantities.state as _state
from llm_analysis.quantities.phases import make_phase
from llm_analysis.report.collected_warnings import collecting_warnings, merged
from llm_analysis.report.render import configs_desc, log_configs, readable_summary, write_summary_files
from llm_analysis.training import config_batch_size_and_gradient_accumulation_steps
import llm_analysis.serving as _serving


class LLMAnalysis:
    """Given a model, GPU, data types and parallel layout, estimate the
    parameters, FLOPs, memory and latency of training and inference.

    The model, GPU and data type are configuration objects, or the names the CLI takes
    (`LLMAnalysis("Qwen/Qwen3-32B", "h100-sxm-80gb", "fp8")`), resolved by
    `get_model_config_by_name`, `get_gpu_config_by_name` and `get_dtype_config_by_name`
    ("fp4" by the model's checkpoint and the GPU): catalogue/model_lookup.py `configs_by_name`."""

    def __init__(self, model_config: Union[ModelConfig, str], gpu_config: Union[GPUConfig, str],
                 dtype_config: Union[DtypeConfig, str] = SIGNATURE_DEFAULT_DTYPE,
                 parallelism_config: ParallelismConfig = SIGNATURE_DEFAULT_PARALLELISM, achieved_tflops: Optional[float] = None,
                 achieved_memory_bandwidth_GBs: Optional[float] = None, flops_efficiency: Optional[float] = None,
                 hbm_memory_efficiency: Optional[float] = None, intra_node_memory_efficiency: float = 1.0,
                 inter_node_memory_efficiency: float = 1.0, attention_flops: Optional[str] = None,
                 logits: Optional[str] = None, num_gpus_per_node: Optional[int] = None,
                 mla_attention: Optional[str] = None, conventions: Optional[str] = None,
                 perf_model: Union[str, Profile] = "roofline", kernel_launch: Optional[str] = None) -> None:
        model_config, gpu_config, dtype_config = configs_by_name(model_config, gpu_config, dtype_config)
        # numpy scalars read as the Python numbers they hold (quantities/arguments.py)
        achieved_tflops, achieved_memory_bandwidth_GBs = plain(achieved_tflops), plain(achieved_memory_bandwidth_GBs)
        self.model_config = instance(model_config, ModelConfig, "model_config")
        self.gpu_config = instance(gpu_config, GPUConfig, "gpu_config")
        self.dtype_config = owned_instance(dtype_config, DtypeConfig, "dtype_config", SIGNATURE_DEFAULT_DTYPE)
        self.parallelism_config = owned_instance(parallelism_config, ParallelismConfig, "parallelism_config",
                                                 SIGNATURE_DEFAULT_PARALLELISM)
        check_achieved_rates(gpu_config, dtype_config, achieved_tflops, achieved_memory_bandwidth_GBs)
        # an achieved rate overrides the efficiency given beside it, which then reads as the rate over its peak
        # (as the mirrored system's constructor sets it; the cost model times with the rate itself)
        self.flops_efficiency = efficiency_beside_rate(flops_efficiency, "flops_efficiency", achieved_tflops,
                                                       "achieved_tflops", peak_tflops_for_dtype(gpu_config, dtype_config))
        self.hbm_memory_efficiency = efficiency_beside_rate(hbm_memory_efficiency, "hbm_memory_efficiency",
                                                            achieved_memory_bandwidth_GBs, "achieved_memory_bandwidth_GBs",
                                                            gpu_config.hbm_bandwidth_in_GB_per_sec)
        self.intra_node_memory_efficiency = efficiency(intra_node_memory_efficiency, "intra_node_memory_efficiency")
        self.inter_node_memory_efficiency = efficiency(inter_node_memory_efficiency, "inter_node_memory_efficiency")
        self.achieved_tflops = keep_number(achieved_tflops)  # validated by check_achieved_rates
        self.achieved_memory_bandwidth_GBs = keep_number(achieved_memory_bandwidth_GBs)
        # what the views and training count, and inference() by default (model/conventions.py)
        self.convention_choice = ConventionChoice.from_arguments(convention_name(conventions), attention_flops, logits,
                                                                 mla_attention)
        self.conventions = self.convention_choice.counted  # (a variant replaces it: with_conventions)
        self.inference_conventions = self.convention_choice.inference
        self.encoder_seq_len: Optional[int] = None  # None: cross-attention work is refused (with_encoder_seq_len)
        self.image_tokens: Optional[int] = None  # None: no image input, the vision tower idle (with_image_tokens)
        self.num_gpus_per_node = integer_or_default(num_gpus_per_node, gpu_config.num_gpus_per_node,
                                                    "num_gpus_per_node", 1, MAX_PARALLEL_SIZE)
        self._num_gpus_per_node_given = num_gpus_per_node  # None: the GPU's, which update_gpu_config follows
        self.perf_model = perf_model  # "roofline" | "calibrated" | profile path | Profile (cost/calibrated.py)
        self.kernel_launch = _perf.check_launch(kernel_launch)  # None: CUDA graphs serving, eager training
        self._reset()

    # ------------------------------------------------------------ updates
    def _reset(self) -> None:
        """Drop everything derived from the inputs (after a change, or in a new variant)."""
        self._drop_derived()
        # an assignment to a field of a configuration is followed (schema/edits.py)
        self.config_edits = ConfigEdits((self.model_config, self.gpu_config, self.dtype_config,
                                         self.parallelism_config), self._configs_assigned)
        self._variants = Variants()
        with collecting_warnings() as found:  # what the setup alone warns of, for every call's summary
            self.profile = resolve_perf_model(self.perf_model, self.gpu_config)
            check_expert_split(self.parallelism_config, self.model_config.is_moe)  # 1 x 1: "no experts" only if so
            self.describer  # validate the layout now, not at first use
            check_dtype_rate(self.gpu_config, self.dtype_config)  # units present; a fallback rate warned of
            _perf.warn_roofline_rates_beside_calibrated(self)
        self.setup_warnings = found

    def _drop_derived(self) -> None:
        self.__dict__.pop("describer", None)  # (cached properties: the next read rebuilds them)
        self.__dict__.pop("cost_model", None)
        self.__dict__.pop("lower_bound_cost_model", None)

    def _configs_assigned(self) -> None:
        """A field of one of the configurations was assigned: what was derived from it is dropped now,
        and rebuilt at the next read of the describer or a cost model (schema/edits.py)."""
        self._drop_derived()
        self._variants = Variants()  # (variants share the configurations: they are rebuilt from this one)

    def update_model_config(self, model_config: ModelConfig) -> None:
        self.model_config = model_config
        self._reset()

    def update_gpu_config(self, gpu_config: GPUConfig) -> None:
        self.gpu_config = gpu_config
        self.num_gpus_per_node = integer_or_default(self._num_gpus_per_node_given, gpu_config.num_gpus_per_node,
                                                    "num_gpus_per_node", 1, MAX_PARALLEL_SIZE)
        self._reset()

    def update_dtype_config(self, dtype_config: DtypeConfig) -> None:
        self.dtype_config = dtype_config
        self._reset()

    def update_parallelism_config(self, parallelism_config: ParallelismConfig) -> None:
        self.parallelism_config = parallelism_config
        self._reset()

    def update_float_efficiency(self, flops_efficiency: float) -> None:
        self.flops_efficiency = efficiency(flops_efficiency, "flops_efficiency")
        self.achieved_tflops = None  # the efficiency set last is the one that times (the rate was read at init)
        self._reset()

    def update_hbm_memory_efficiency(self, hbm_memory_efficiency: float) -> None:
        self.hbm_memory_efficiency = efficiency(hbm_memory_efficiency, "hbm_memory_efficiency")
        self.achieved_memory_bandwidth_GBs = None
        self._reset()

    def update_intra_node_memory_efficiency(self, intra_node_memory_efficiency: float) -> None:
        self.intra_node_memory_efficiency = efficiency(intra_node_memory_efficiency,
                                                             "intra_node_memory_efficiency")
        self._reset()

    def update_inter_node_memory_efficiency(self, inter_node_memory_efficiency: float) -> None:
        self.inter_node_memory_efficiency = efficiency(inter_node_memory_efficiency,
                                                             "inter_node_memory_efficiency")
        self._reset()

    # -------------------------------------------------------- conventions
    def conventions_named(self, name: Optional[str]) -> Conventions:
        """The inference conventions for `name` (None: the constructor's), with its overrides."""
        return self.convention_choice.for_inference(convention_name(name))

    def with_conventions(self, conventions: Conventions) -> "LLMAnalysis":
        """This analysis counted under other conventions (a cached shallow copy; every
        view of the copy, FLOPs included, follows them)."""
        return self._variants.under_conventions(self, conventions, self._variant)

    def with_encoder_seq_len(self, encoder_seq_len: Optional[int]) -> "LLMAnalysis":
        """This analysis with cross-attention over `encoder_seq_len` encoder positions (a
        cached shallow copy; None: this analysis). A model without cross-attention accepts
        only 0 (ConfigError otherwise)."""
        return self._variants.with_encoder_seq_len(self, plain(encoder_seq_len), self._variant)

    def with_image_tokens(self, image_tokens: Optional[int]) -> "LLMAnalysis":
        """This analysis with `image_tokens` image tokens in each request's prompt, whose
        vision encoder work a prefill runs (a shallow copy; None or 0: this analysis with
        no image input). ConfigError for a model without a vision tower, or one whose
        image-token-to-patch rule is not described (model/vision_tower.py)."""
        return image_variant(self, plain(image_tokens), self._variant)

    def _variant(self, **fields) -> "LLMAnalysis":
        """A shallow copy with `fields` replaced and its derived state rebuilt (its own
        describer, cost model and variants; the original keeps its caches)."""
        self.config_edits.follow(self)  # (a variant is built from the configurations as they are now)
        other = copy.copy(self)
        other.__dict__ = {**self.__dict__, **fields}
        other._reset()
        return other

    # ---------------------------------------------------- collaborators
    describer_class = LayerDescriber  # subclasses swap in their own describer

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        warn_unread_overrides(cls, LLMAnalysis)  # a mirrored get_* override reaches no other figure: said once
    cost_model_class = RooflineCostModel  # ... and their own cost model

    @cached_property
    def describer(self) -> LayerDescriber:
        return derived(self, "describer", self._new_describer)

    def _new_describer(self) -> LayerDescriber:
        d = self.describer_class(self.model_config, self.dtype_config, self.parallelism_config,
                                 self.conventions)
        return d.with_encoder_seq_len(self.encoder_seq_len).with_image_tokens(self.image_tokens)

    def describer_for(self, kv_cache_dtype_bytes: Optional[float]) -> LayerDescriber:
        """The describer, with the KV cache stored in `kv_cache_dtype_bytes` bytes
        per element (None: the activation dtype)."""
        return self.describer.with_kv_cache_bytes(kv_cache_dtype_bytes)

    @cached_property
    def cost_model(self) -> CostModel:
        """Operator -> seconds and bound (`cost/`): the only place a time is computed.
        perf_model="roofline": `cost_model_class`; otherwise the calibrated model
        of `self.profile` (facade_perf.py)."""
        return derived(self, "cost_model", lambda: _perf.cost_model(self))

    @property
    def inference_summary_hook(self):
        """What inference() adds to a new summary (facade_perf.inference_summary_hook)."""
        return _perf.inference_summary_hook(self)

    @cached_property
    def lower_bound_cost_model(self) -> CostModel:
        """The roofline at this analysis' efficiencies (default 1: a true lower bound), whatever perf_model is."""
        return derived(self, "lower_bound_cost_model", lambda: _perf.roofline_model(self, RooflineCostModel))

    def operators(self, phase: str = "prefill", batch_size: int = 1, seq_len: int = 512,
                  context_len: Optional[int] = None, per_layer: bool = True,
                  encoder_seq_len: Optional[int] = None) -> List[Dict[str, Any]]:
        """The operator records of a phase, as plain dicts (for reports and charts).

        phase: "prefill" (batch_size x seq_len new tokens), "decode" (one token
        per sequence at `context_len`, default seq_len + 1) or "train" (same
        shapes as prefill). With per_layer=True each layer kind is listed once
        with its repeat count; otherwise operators are scaled by their counts.
        `encoder_seq_len`: see `with_encoder_seq_len` (cross-attention models).
        """
        a = self.with_encoder_seq_len(encoder_seq_len)
        return _lat.operator_rows(a, make_phase(phase, batch_size, seq_len, context_len),
                                  flag(per_layer, "per_layer"))

    # ----------------------------------------------------- hardware views
    def get_TFLOPS_per_gpu(self) -> float:
        """Achieved TFLOP/s per GPU for the dtype: `achieved_tflops` if given,
        else the dense peak of the dtype times flops_efficiency."""
        return self.cost_model.achieved_tflops

    def get_gpu_hbm_bandwidth(self) -> float:
        """Achieved HBM bandwidth in GB/s."""
        return self.cost_model.achieved_hbm_GB_per_s

    def get_intra_node_bandwidth(self) -> float:
        """Achieved intra-node link bandwidth in GB/s."""
        return achieved_link_GB_per_s(self.gpu_config.intra_node_bandwidth_in_GB_per_sec,
                                      self.intra_node_memory_efficiency)

    def get_inter_node_bandwidth(self) -> float:
        """Achieved inter-node link bandwidth in GB/s."""
        return achieved_link_GB_per_s(self.gpu_config.inter_node_bandwidth_in_GB_per_sec,
                                      self.inter_node_memory_efficiency)

    def get_ridge_point(self) -> float:
        """FLOPs per byte above which an operator is compute-bound on this GPU."""
        return self.cost_model.ridge_point

    def get_pivot(self) -> float:
        """(weight bytes / HBM bandwidth) / (forward FLOPs of one token / FLOP/s):
        the batch (in tokens) at which a decode step turns compute-bound,
        ignoring the KV cache."""
        return _lat.pivot(self)

    # ------------------------------------------------------------- timing
    def weighted_time_s(self, weighted: List[Tuple[int, Operator]]) -> float:
        """Time of (repeat count, operator) pairs: collectives pay their latency every time."""
        return _lat.weighted_time_s(self, weighted)

    def pipeline_handoff_time_s(self, batch_size: int, tokens_per_seq: int, scatter_gather: bool = False) -> float:
        """Point-to-point sends of the hidden states between pipeline stages (scatter_gather:
        Megatron's training hand-off, quantities/latency.py)."""
        return _lat.pipeline_handoff_s(self, batch_size, tokens_per_seq, scatter_gather)

    # --------------------------------------------------------- parameters
    def get_num_params_embedding(self, shared_embedding: bool = True) -> int:
        """Input embeddings (word, position, token-type, embedding norm, input
        projection); with shared_embedding=False also the output projection
        (untied LM head, output projection, bias, pooler). A model that ties its
        output projection to its input embedding has none of its own: its count
        stays the same, with a warning (the mirrored system counted a copy)."""
        return _params.embedding(self, shared_embedding)

    def get_num_params_output_embedding(self) -> int:
        """Parameters of the output side only: untied LM head, its bias, output projection, pooler."""
        return _params.output_embedding(self)

    def get_num_params_per_layer_attn(self) -> Union[int, float]:
        """Attention parameters of one layer (mean over layers when layers differ)."""
        return _params.layer_mean_field(self, "params", ("attention",))

    def get_num_params_per_layer_mlp(self) -> Union[int, float]:
        """MLP parameters of one layer, all experts included (mean over layers)."""
        return _params.layer_mean_field(self, "params", ("mlp", "experts"))

    def get_num_params_per_layer_router(self) -> Union[int, float]:
        return _params.layer_mean_field(self, "params", ("router",))

    def get_num_params_per_layer_layernorm(self) -> Union[int, float]:
        return _params.layer_mean_field(self, "params", ("norm",))

    def get_num_params_per_layer(self) -> Union[int, float]:
        return _params.layer_mean_field(self, "params", ("attention", "mlp", "experts", "router", "norm"))

    def get_num_params_last_layernorm(self) -> int:
        return _params.last_layernorm(self)

    def get_num_params_total(self) -> int:
        """Every parameter of the model (the count of the real model's
        `parameters()`, tied weights counted once)."""
        return _params.total(self)

    def get_num_active_params_per_layer(self) -> Union[int, float]:
        """Parameters one token uses in a layer: dense parts, router, shared
        experts and top-k routed experts (mean over layers)."""
        return _params.active_per_layer(self)

    def get_num_active_params_total(self) -> int:
        """Parameters one token uses, the input-embedding table counted whole (as the mirrored
        system, Qwen's and Mistral's model cards count them)."""
        return _params.active_total(self)

    def get_num_active_params_without_input_embedding(self) -> int:
        """Active parameters without the input-embedding table (as OpenAI's gpt-oss card counts)."""
        return _params.active_without_input_embedding(self)

    def get_num_params_breakdown(self) -> Dict[str, int]:
        return _params.breakdown(self)

    # -------------------------------------------------------------- FLOPs
    def get_num_flops_fwd_per_layer_attn(self, batch_size: int, seq_len: int) -> float:
        """Forward FLOPs of one layer's attention (projections and core), mean over layers."""
        return _flops.per_layer(self, batch_size, seq_len, ("attention",))

    def get_num_flops_fwd_per_layer_mlp(self, batch_size: int, seq_len: int) -> float:
        return _flops.per_layer(self, batch_size, seq_len, ("mlp", "experts", "router"))

    def get_num_flops_fwd_per_layer(self, batch_size: int, seq_len: int) -> float:
        return _flops.per_layer(self, batch_size, seq_len, None)

    def get_num_flops_fwd_total(self, batch_size: int, seq_len: int) -> float:
        """Forward FLOPs of the whole model for batch_size sequences of seq_len
        tokens (matmuls and attention core, 2 per multiply-add; independent of
        parallelism)."""
        return _flops.model_flops(self, batch_size, seq_len)

    def get_num_flops_bwd_total(self, batch_size: int, seq_len: int) -> float:
        """Backward FLOPs: twice the forward (gradients w.r.t. inputs and weights)."""
        return _flops.backward_total(self, batch_size, seq_len)

    def get_num_flops_total_attn_compute(self, batch_size: int, seq_len: int) -> float:
        """FLOPs of the attention core (QK^T and attention over V) of all layers:
        what selective recomputation (ATTN_COMPUTE) repeats."""
        return _flops.attention_core(self, batch_size, seq_len)

    def get_num_flops_decode_step(self, batch_size: int, context_len: int) -> float:
        """FLOPs of one decode step: batch_size new tokens attending to
        `context_len` tokens each (the new one included)."""
        return _flops.decode_step(self, batch_size, context_len)

    # ------------------------------------------------------------- memory
    def get_weight_memory_per_gpu(self, ds_zero: DSZeRO = DSZeRO.NONE) -> float:
        """Weight bytes on the most loaded GPU (the heaviest pipeline stage)."""
        return _mem.weights_per_gpu(self, ds_zero)

    def get_weight_memory_per_layer(self, ds_zero: DSZeRO = DSZeRO.NONE, return_breakdown: bool = False):
        """Weight bytes of one layer on one GPU (mean over layers), TP/EP and
        ZeRO-3 sharded; with return_breakdown also (attention, mlp, norm) bytes."""
        return _mem.weights_per_layer(self, ds_zero, return_breakdown)

    def get_memory_embedding(self, ds_zero: DSZeRO = DSZeRO.NONE) -> float:
        """Bytes of the input embeddings plus the output projection (untied head)
        on one GPU: vocab-parallel over TP, ZeRO-3 sharded over DP."""
        return _mem.embedding(self, ds_zero)

    def get_weight_memory_last_layernorm(self, ds_zero: DSZeRO = DSZeRO.NONE) -> float:
        return _mem.last_layernorm(self, ds_zero)

    def get_memory_kv_cache_per_layer(self, batch_size: int, seq_len: int,
                                      kv_cache_dtype_bytes: Optional[float] = None) -> float:
        """KV-cache bytes of one layer on one GPU for batch_size sequences of
        seq_len tokens (mean over layers: sliding-window layers keep at most the
        last window - 1 tokens; MLA keeps the latent and the rope key; KV heads fewer than
        tp_size are replicated)."""
        return _mem.kv_cache_per_layer(self, batch_size, seq_len, kv_cache_dtype_bytes)

    def get_memory_kv_cache_total(self, batch_size: int, seq_len: int,
                                  kv_cache_dtype_bytes: Optional[float] = None, stage: Optional[int] = None) -> float:
        """KV-cache bytes per GPU of all layers (or of one pipeline stage)."""
        return _mem.kv_cache_total(self, batch_size, seq_len, kv_cache_dtype_bytes, stage)

    def get_memory_kv_cache_per_gpu(self, batch_size: int, seq_len: int,
                                    kv_cache_dtype_bytes: Optional[float] = None) -> float:
        """KV-cache bytes on the most loaded GPU (heaviest pipeline stage)."""
        return _mem.kv_cache_per_gpu(self, batch_size, seq_len, kv_cache_dtype_bytes)

    # activation memory ------------------------------------------------------
    def get_activation_memory_per_layernorm(self, batch_size: int, seq_len: int, dtype_bytes: float = BYTES_FP32) -> float:
        """Bytes of one norm's stored input: sbh x dtype_bytes (split by t with SP)."""
        return _act.per_layernorm(self, batch_size, seq_len, dtype_bytes)

    def get_activation_memory_per_layer_attn(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                             flash_attn: bool = True, softmax_dropout: bool = False,
                                             attn_dropout: bool = True,
                                             activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE) -> float:
        """Stored attention activations of one layer (Korthikanti et al. 2022 §4.1);
        for inference, the largest live tensor set of the attention block."""
        return _act.per_layer_attn(self, batch_size, seq_len, is_inference, flash_attn, softmax_dropout, attn_dropout,
                                   activation_recomputation)

    def get_activation_memory_per_layer_mlp(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                            activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                                            mlp_activation_quant_bits: Optional[int] = None,
                                            mlp_1linear_quant_bits: Optional[int] = None,
                                            mlp_gelu_input_quant_bits: Optional[int] = None,
                                            mlp_2linear_quant_bits: Optional[int] = None,
                                            recompute_gelu: bool = False, gated_linear_units: Optional[bool] = None,
                                            with_dropout: bool = False, moe: Optional[bool] = None) -> float:
        """Stored MLP activations of one layer (Korthikanti et al. 2022 §4.1),
        with optional quantised storage (bits) of the first-linear input, the
        activation input and the second-linear input. Mean over layers for MoE
        models unless `moe` picks dense or MoE layers."""
        return _act.per_layer_mlp(self, batch_size, seq_len, is_inference, activation_recomputation,
                                  mlp_activation_quant_bits, mlp_1linear_quant_bits, mlp_gelu_input_quant_bits,
                                  mlp_2linear_quant_bits, recompute_gelu, gated_linear_units, with_dropout, moe)

    def get_activation_memory_per_layer(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                        activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                                        layernorm_dtype_bytes: float = BYTES_FP32, flash_attn: bool = True,
                                        softmax_dropout: bool = False,
                                        mlp_activation_quant_bits: Optional[int] = None,
                                        mlp_1linear_quant_bits: Optional[int] = None,
                                        mlp_gelu_input_quant_bits: Optional[int] = None,
                                        mlp_2linear_quant_bits: Optional[int] = None,
                                        mlp_recompute_gelu: bool = False, return_breakdown: bool = False):
        """Activation bytes one layer keeps for the backward pass (training), or
        the largest live set of a layer (inference: the training-only arguments
        do not apply). Korthikanti et al. 2022: sbh(34 + 5as/h) for a GPT layer
        without recomputation or parallelism."""
        return _act.per_layer(self, batch_size, seq_len, is_inference, activation_recomputation, layernorm_dtype_bytes,
                              flash_attn, softmax_dropout, mlp_activation_quant_bits, mlp_1linear_quant_bits,
                              mlp_gelu_input_quant_bits, mlp_2linear_quant_bits, mlp_recompute_gelu, return_breakdown)

    def get_activation_memory_input_embedding(self, batch_size: int, seq_len: int) -> float:
        """Bytes of the embedding output kept for backward (split by t with SP)."""
        return _act.input_embedding(self, batch_size, seq_len)

    def get_activation_memory_output_embedding(self, batch_size: int, seq_len: int) -> float:
        """Bytes of the logits (vocab-parallel over TP), in the activation dtype."""
        return _act.output_embedding(self, batch_size, seq_len)

    def get_loss_bwd_memory(self, batch_size: int, seq_len: int) -> float:
        """Temporary bytes of the loss' backward pass: the gradient of the logits (the
        logits' shape and dtype, vocab-parallel over TP)."""
        return _act.loss_backward(self, batch_size, seq_len)

    # optimizer state and gradients -----------------------------------------
    def get_memory_optimizer_state_and_gradient_per_layer(self, master_weights_dtype_bytes: float = BYTES_FP32,
                                                          other_op_bytes: Optional[float] = None,
                                                          ds_zero: DSZeRO = DSZeRO.NONE) -> Tuple[float, float]:
        """(optimizer-state bytes, gradient bytes) of one layer on one GPU
        (rules in quantities/state.py: Adam 12 bytes/param by default, 16-bit
        gradients; ZeRO-1 shards optimizer states, ZeRO-2 also gradients)."""
        return _state.per_layer(self, master_weights_dtype_bytes, other_op_bytes, ds_zero)

    def get_memory_optimizer_state_and_gradient_embedding(self, master_weights_dtype_bytes: float = BYTES_FP32,
                                                          other_op_bytes: Optional[float] = None,
                                                          ds_zero: DSZeRO = DSZeRO.NONE) -> Tuple[float, float]:
        return _state.embedding(self, master_weights_dtype_bytes, other_op_bytes, ds_zero)

    def get_memory_optimizer_state_and_gradient_last_layernorm(self, master_weights_dtype_bytes: float = BYTES_FP32,
                                                               other_op_bytes: Optional[float] = None,
                                                               ds_zero: DSZeRO = DSZeRO.NONE) -> Tuple[float, float]:
        return _state.last_layernorm(self, master_weights_dtype_bytes, other_op_bytes, ds_zero)

    # ------------------------------------------------------------ latency views
    def get_latency_fwd_per_layer_attn(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                       activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE) -> float:
        """Time of one layer's attention forward (projections + core), mean over layers, timed
        as inference() (`is_inference`) or training() times it (quantities/latency.py `forward_view`).
        `activation_recomputation` is accepted for API compatibility and unused: recomputation
        adds time to the backward pass (see training())."""
        unused(is_inference, activation_recomputation)
        return _lat.prefill_layer_mean(_lat.forward_view(self, is_inference), batch_size, seq_len,
                                       ("attention",))

    def get_latency_fwd_per_layer_mlp(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                      activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE) -> float:
        """Time of one layer's MLP forward (router and experts included), mean over
        layers; `is_inference` and `activation_recomputation` as in get_latency_fwd_per_layer_attn."""
        unused(is_inference, activation_recomputation)
        return _lat.prefill_layer_mean(_lat.forward_view(self, is_inference), batch_size, seq_len,
                                       ("mlp", "experts", "router"),
                                       kinds=("matmul", "elementwise", "norm", "attention"))

    def get_latency_fwd_per_layer_mlp_moe_alltoall(self, batch_size: int, seq_len: int) -> float:
        return _lat.moe_alltoall_per_layer(self, batch_size, seq_len)

    def get_latency_fwd_per_layer_shared_dp_comm(self) -> float:
        """Not modelled separately: data-parallel traffic is in training()'s breakdown."""
        return 0.0

    def get_latency_fwd_per_layernorm(self, batch_size: int, seq_len: int, dtype_bytes: float = BYTES_FP32) -> float:
        """Memory-bound time of one norm: read and write sbh elements of dtype_bytes."""
        return _lat.layernorm(self, batch_size, seq_len, dtype_bytes)

    def get_latency_fwd_per_tp_comm(self, batch_size: int, seq_len: int, dtype_bytes: float) -> float:
        """One ring all-reduce of the layer output over the TP group."""
        return _lat.tp_comm(self, batch_size, seq_len, dtype_bytes)

    def get_latency_fwd_per_layer(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                  activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                                  layernorm_dtype_bytes: float = BYTES_FP32, ds_zero: DSZeRO = DSZeRO.NONE):
        """(time of one layer's forward, breakdown dict), mean over layers, timed as inference()
        (`is_inference`) or training() times it (quantities/latency.py `forward_view`).
        `activation_recomputation`, `layernorm_dtype_bytes` and `ds_zero` are accepted for API
        compatibility and unused: norms run in the activation dtype of the operator records,
        recomputation is backward time, and ZeRO gathers are data-parallel traffic (training()'s
        breakdown)."""
        unused(is_inference, activation_recomputation, layernorm_dtype_bytes, ds_zero)
        return _lat.per_layer(_lat.forward_view(self, is_inference), batch_size, seq_len)

    def get_latency_fwd_input_embedding(self, batch_size: int, seq_len: int, dtype_bytes: float = BYTES_FP32) -> float:
        """Embedding lookups (and their TP all-reduce). `dtype_bytes` is accepted
        for API compatibility and unused: the embedding dtype comes from the dtype config."""
        unused(dtype_bytes=dtype_bytes)
        return _lat.input_embedding(self, batch_size, seq_len)

    def get_latency_fwd_output_embedding_loss(self, batch_size: int, seq_len: int) -> float:
        return _lat.output_embedding(self, batch_size, seq_len)

    def get_latency_fwd(self, batch_size: int, seq_len: int, is_inference: bool = True,
                        activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                        layernorm_dtype_bytes: float = BYTES_FP32, breakdown_prefix: str = "",
                        ds_zero: DSZeRO = DSZeRO.NONE):
        """(forward time of the whole model on one pipeline replica, breakdown), timed as inference()
        (`is_inference`) or training() times it: is_inference=False gives training()'s `latency_fwd`
        (quantities/latency.py `forward_view`). `activation_recomputation`, `layernorm_dtype_bytes`
        and `ds_zero`: accepted for API compatibility and unused, as in get_latency_fwd_per_layer."""
        unused(is_inference, activation_recomputation, layernorm_dtype_bytes, ds_zero)
        return _lat.forward(_lat.forward_view(self, is_inference), batch_size, seq_len,
                            text(breakdown_prefix, "breakdown_prefix"))

    def get_latency_weight_update(self, ds_zero: DSZeRO = DSZeRO.NONE, master_weights_dtype_bytes: float = BYTES_FP32,
                                  other_op_bytes: Optional[float] = None,
                                  trainable_params_per_gpu: Optional[float] = None) -> float:
        """Optimizer step: read master weights, optimizer states and gradients,
        write master weights, states and the 16-bit weights (memory-bound), on the
        heaviest stage's GPU. With ZeRO-1 and above each GPU updates only its 1/dp
        shard (experts: 1/rdp). `trainable_params_per_gpu` replaces the count (e.g.
        LoRA adapters only). Defaults: Adam, fp32 master weights (28 bytes/param); no master
        copy where the weights are as wide as it (fp32 weights) or master_weights_dtype_bytes
        is 0: the weights themselves read and written instead (quantities/state.py)."""
        return _state.optimizer_step_s(self, ds_zero, master_weights_dtype_bytes, other_op_bytes,
                                       trainable_params_per_gpu)

    # --------------------------------------------------------- orchestrators
    def inference(self, batch_size_per_gpu: int = 1, seq_len: int = 512, num_tokens_to_generate: int = 32,
                  use_kv_cache: bool = True, ds_zero: DSZeRO = DSZeRO.NONE, layernorm_dtype_bytes: int = 2,
                  kv_cache_dtype_bytes: Optional[float] = None, cost_per_gpu_hour: Optional[float] = None,
                  output_dir: Optional[str] = None, output_file_suffix: str = "",
                  kv_cache_dtype: Optional[str] = None, conventions: Optional[str] = None,
                  encoder_seq_len: Optional[int] = None, image_tokens: Optional[int] = None) -> dict:
        """Inference analysis: prefill, per-step decode, memory, max batch,
        throughput and cost. See `inference/run.py`. `kv_cache_dtype` names the
        KV-cache element type (fp8, fp16, bf16, int8, ...; `formats.KV_CACHE_DTYPES`),
        refused when the GPU cannot use it; it sets `kv_cache_dtype_bytes`.
        `conventions`: "serving" (default: causal attention FLOPs, logits only at the
        sampled position, MLA absorbed) or "transformers" (the eager forward that
        FlopCounterMode measures); the constructor's explicit convention arguments win.
        Under perf_model="calibrated" the summary adds `<key>_lower_bound` (facade_perf.py).
        `encoder_seq_len`: encoder positions a cross-attention decoder attends to (required
        for such models; model/cross_attention.py). `image_tokens`: image tokens in each
        request's prompt (vision-language models): the prefill runs the vision tower on them
        (model/vision_tower.py); without it a text-only request is timed."""
        args = {"batch_size_per_gpu": batch_size_per_gpu, "seq_len": seq_len,  # a literal: faster than locals()
                "num_tokens_to_generate": num_tokens_to_generate, "use_kv_cache": use_kv_cache, "ds_zero": ds_zero,
                "layernorm_dtype_bytes": layernorm_dtype_bytes, "kv_cache_dtype_bytes": kv_cache_dtype_bytes,
                "cost_per_gpu_hour": cost_per_gpu_hour, "output_dir": output_dir,
                "output_file_suffix": output_file_suffix, "kv_cache_dtype": kv_cache_dtype}
        args = plain_values(args)  # numpy scalars as the Python numbers they hold (quantities/arguments.py)
        checked_output_dir(args["output_dir"])
        a = self.with_conventions(self.conventions_named(conventions)).with_encoder_seq_len(encoder_seq_len)
        # seq_len as the number it names: the image tokens are checked against it (8.0 or '8' skipped that)
        a = with_request_images(a, image_tokens, count(args["seq_len"], "seq_len"))
        with collecting_warnings() as found:
            warn_worker_layout_unread(self.parallelism_config, "inference()", self.model_config.is_moe)
            summary = _perf.inference(a, args)
        summary.update(image_entries(a))
        summary["num_active_params_without_input_embedding"] = self.get_num_active_params_without_input_embedding()
        summary["warnings"] = merged(self.setup_warnings, found)
        return summary

    def training(self, batch_size_per_gpu: Optional[int] = None, gradient_accumulation_steps: Optional[int] = None,
                 global_batch_size: Optional[int] = None, seq_len: Optional[int] = None,
                 total_num_tokens: Optional[int] = None,
                 activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                 ds_zero: DSZeRO = DSZeRO.NONE, layernorm_dtype_bytes: int = BYTES_FP32,
                 master_weights_dtype_bytes: int = BYTES_FP32, other_op_bytes: Optional[int] = None,
                 flash_attn: bool = True, softmax_dropout: bool = False,
                 mlp_activation_quant_bits: Optional[int] = None, mlp_1linear_quant_bits: Optional[int] = None,
                 mlp_gelu_input_quant_bits: Optional[int] = None, mlp_2linear_quant_bits: Optional[int] = None,
                 mlp_recompute_gelu: bool = False, output_dir: Optional[str] = None,
                 output_file_suffix: str = "", encoder_seq_len: Optional[int] = None, **kwargs) -> dict:
        """Training analysis: memory per GPU, time per iteration, total time,
        GPU-hours, cost, MFU. See training/run.py. `encoder_seq_len`: as in inference()."""
        args = {"batch_size_per_gpu": batch_size_per_gpu,  # a literal, as inference()'s
                "gradient_accumulation_steps": gradient_accumulation_steps, "global_batch_size": global_batch_size,
                "seq_len": seq_len, "total_num_tokens": total_num_tokens,
                "activation_recomputation": activation_recomputation, "ds_zero": ds_zero,
                "layernorm_dtype_bytes": layernorm_dtype_bytes,
                "master_weights_dtype_bytes": master_weights_dtype_bytes, "other_op_bytes": other_op_bytes,
                "flash_attn": flash_attn, "softmax_dropout": softmax_dropout,
                "mlp_activation_quant_bits": mlp_activation_quant_bits,
                "mlp_1linear_quant_bits": mlp_1linear_quant_bits,
                "mlp_gelu_input_quant_bits": mlp_gelu_input_quant_bits,
                "mlp_2linear_quant_bits": mlp_2linear_quant_bits,
                "mlp_recompute_gelu": mlp_recompute_gelu, "output_dir": output_dir,
                "output_file_suffix": output_file_suffix}
        args = plain_values({**args, **kwargs})  # numpy scalars as Python numbers (quantities/arguments.py)
        checked_output_dir(args["output_dir"])
        with collecting_warnings() as found:
            warn_worker_layout_unread(self.parallelism_config, "training()", self.model_config.is_moe)
            summary = _perf.training(self.with_encoder_seq_len(encoder_seq_len), args)
        summary["num_active_params_without_input_embedding"] = self.get_num_active_params_without_input_embedding()
        summary["warnings"] = merged(self.setup_warnings, found)
        return summary

    def config_batch_size_and_gradient_accumulation_steps(self, max_batch_size_per_gpu: int,
                                                          batch_size_per_gpu: Optional[int] = None,
                                                          gradient_accumulation_steps: Optional[int] = None,
                                                          global_batch_size: Optional[int] = None) -> tuple:
        """(batch_size_per_gpu, gradient_accumulation_steps, global_batch_size) with
        global = per GPU x steps x dp_size, the largest per-GPU batch when none is given."""
        return config_batch_size_and_gradient_accumulation_steps(
            self.parallelism_config.dp_size, max_batch_size_per_gpu, batch_size_per_gpu,
            gradient_accumulation_steps, global_batch_size)

    # ------------------------------------------------------------- output
    def get_configs_desc(self) -> str:
        return configs_desc(self)

    def print_config(self, name: str = "Training Configs") -> None:
        log_configs(self, name)

    def get_readable_summary_dict(self, summary_dict: dict, title: str = "Summary") -> str:
        return readable_summary(summary_dict, title)

    def output_summary_dict(self, summary_dict: dict, output_dir: str, print_human_readable: bool = True,
                            output_file_suffix: str = "") -> str:
        return write_summary_files(self, summary_dict, output_dir, print_human_readable, output_file_suffix)

    # ------------------------------------------------------------- serving
    def serve(self, concurrency: Optional[int] = None, request_rate: Optional[float] = None, input_len=None,
              output_len=None, framework: str = "vllm", lengths=None, **engine_options) -> dict:
        """A deployment of replicas of this layout under load: `concurrency` closed-loop clients or
        Poisson arrivals at `request_rate` per second; `input_len` / `output_len` in tokens (a number, or
        {"mean": m, "spread": s}), or `lengths`, (input, output) pairs or a file of them; `framework`
        "vllm", "sglang" or "trtllm", with its options as keywords (max_num_batched_tokens, max_num_seqs,
        gpu_memory_utilization, block_size, prefix_cache_share, kv_cache_dtype, seed, num_requests, ...).
        Means, p50/p90/p99 of TTFT, TPOT and end-to-end latency, throughput, KV pool, saturation rate
        and notes, in base units. See serving/run.py."""
        with collecting_warnings() as found:
            summary = _serving.serve(self, concurrency, request_rate, input_len, output_len, framework, lengths,
                                     **engine_options)
        summary["warnings"] = merged(self.setup_warnings, found)  # (as inference() and training() file them)
        return summary
