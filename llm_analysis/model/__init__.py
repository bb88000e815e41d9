"""The one description of a model's arithmetic: a list of named operators.

For a phase (prefill of `batch` sequences of `q_len` new tokens; a decode step of
`batch` sequences at context length c; a training micro-batch) every layer kind
is described as operators — each matmul with its shapes, the attention core,
norms, the MLP activation, router and experts, embeddings, output head and the
collectives that parallelism adds. Parameters, FLOPs, bytes moved, memory and
roofline time are all derived from these records, so a formula lives in one
place. A custom architecture subclasses `LayerDescriber` (see
`examples/custom_architecture.py`) and changes the lists.

Conventions (stated in the README):
- FLOPs count 2 per multiply-accumulate of matmuls and of the attention core, as
  `torch.utils.flop_counter.FlopCounterMode` does; bias adds, norms, softmax and
  activations are not counted as FLOPs (their few FLOPs per byte make them
  memory-bound: their time is their bytes moved).
- `attention_flops="full"` (default) counts the whole q_len x kv_len score matrix,
  as eager attention computes it before masking; `"causal"` counts only the
  unmasked causal (and sliding-window) part, as flash-attention kernels do.
- `logits="all"` (default) computes logits at every position (a plain forward);
  `"last"` only at the last prompt position (what servers do in prefill).
- Multi-head latent attention caches the latent c_KV and the rope key. `mla="expand"`
  (default) decodes as transformers does: every step re-expands all cached tokens
  through kv_b_proj into per-head K and V; `"absorb"` folds kv_b_proj into the query
  and the output (vLLM, SGLang decode), attending over the latent directly.
- A sliding-window layer attends to at most `sliding_window` keys and keeps the
  last `sliding_window - 1` tokens in its cache between steps. A chunked one
  (`sliding_window_chunked`, Llama 4) is counted so under `"full"`; under `"causal"`
  a query at position p attends to the p mod C + 1 keys of its own chunk.
- Experts the eager code runs on every token (`moe_eager_all_experts`, Llama 4's
  Llama4TextMoe) are counted E/k times the routed work under `"full"`, the extra as
  counted-not-executed (`Operator.masked_flops`); `"causal"` counts top-k, as
  serving engines run them.
- `projections`: "separate" (transformers: q, k, v, gate, up each a linear) or
  "fused" (serving: the projections reading the same input as one GEMM, as the
  engines' QKV and gate_up linears run them; routed experts keep three operators).
- Bytes moved assume fused kernels: a matmul reads its weights and input and
  writes its output once; attention reads q, k, v (or the KV cache) and writes its
  output without materialising the score matrix (flash attention).
- Roles are fields set by the describer, never parsed from names: `expert_role`
  (routed / shared expert), `recompute_class` (which recomputation mode repeats
  the operator), `comm_group`, `lora_target` (the projection id LoRA matches).
"""

from llm_analysis.model.describer import LayerDescriber
from llm_analysis.model.records import (Conventions, LayerKind, ModelPart, Operator, Phase, causal_pairs, layer_groups, layer_kinds,
                      stage_layer_groups, sum_field)

__all__ = ["Conventions", "LayerDescriber", "LayerKind", "ModelPart", "Operator", "Phase", "causal_pairs", "layer_groups",
           "layer_kinds", "stage_layer_groups", "sum_field"]
