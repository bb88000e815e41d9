"""Nemotron-3's latent MoE (Super / Ultra: `moe_latent_size` in a nemotron_h config.json), read by the
nemotron_h family into ModelConfig.moe_latent_dim and described by model/variants.py
latent_projection_ops and the routed experts of model/mlp.py.

What transformers' NemotronHMoE computes (modeling_nemotron_h.py, transformers 5.23): the router
reads the normed hidden state [T x H]; fc1_latent_proj projects it to the latent [T x L] once per
token; the experts (NemotronHExperts, non-gated ReLU^2) run there: up_proj [L -> F], down_proj
[F -> L] for each of a token's k experts; fc2_latent_proj projects the sum back [T x H]; the shared
expert (NemotronHMLP of moe_shared_expert_intermediate_size) reads the hidden state itself.

Expected values are derived by hand below from the config fields (2 FLOPs per multiply-add), and
cross-checked against transformers itself: parameters on the meta device, prefill FLOPs of a small
real copy on the CPU under FlopCounterMode (real routing: every token runs k experts).
"""

from __future__ import annotations

import copy
import math

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.mapping import map_hf_config

GPU = get_gpu_config_by_name("a100-sxm-80gb")
BATCH, SEQ = 2, 8

H, L, E, K, F, S = 64, 24, 8, 2, 40, 56  # hidden, latent, experts, top-k, expert width, shared width
V, HEADS, KV_HEADS, HEAD_DIM = 96, 4, 2, 16
TINY = dict(model_type="nemotron_h", architectures=["NemotronHForCausalLM"], hidden_size=H, vocab_size=V,
            num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
            hybrid_override_pattern="*E", num_hidden_layers=2, moe_latent_size=L, n_routed_experts=E,
            num_experts_per_tok=K, moe_intermediate_size=F, moe_shared_expert_intermediate_size=S,
            n_shared_experts=1, intermediate_size=F, n_group=1, topk_group=1, mlp_bias=False,
            mlp_hidden_act="relu2", tie_word_embeddings=False, mamba_num_heads=8, mamba_head_dim=16,
            n_groups=1, ssm_state_size=16, chunk_size=8, conv_kernel=4, max_position_embeddings=64,
            time_step_limit=[0.0, float("inf")], num_nextn_predict_layers=1, mtp_hybrid_override_pattern="*E")

# one MoE block by hand (NemotronHMoE): router [H x E], fc1 [H x L], E experts of up [L x F] and
# down [F x L], fc2 [L x H], the shared expert up [H x S] and down [S x H]; no biases (mlp_bias False)
MOE_PARAMS = E * H + H * L + E * (L * F + F * L) + L * H + (H * S + S * H)
ROUTED_PARAMS = E * (L * F + F * L)
ATTENTION_PARAMS = H * HEADS * HEAD_DIM + 2 * H * KV_HEADS * HEAD_DIM + HEADS * HEAD_DIM * H
# embedding, untied LM head, final norm; each block one RMSNorm [H]
TOTAL_PARAMS = V * H + V * H + H + (H + ATTENTION_PARAMS) + (H + MOE_PARAMS)


def moe_flops(tokens: int) -> int:
    """Matmul FLOPs of the MoE block over `tokens` tokens: router, fc1, k experts per token in the
    latent space (up and down), fc2, the shared expert on the hidden state."""
    return 2 * tokens * (H * E + H * L + K * (L * F + F * L) + L * H + (H * S + S * H))


def _ours(raw: dict = TINY) -> ModelConfig:
    return map_hf_config(copy.deepcopy(raw), name="test/nemotron-latent", source="test", what="test/nemotron-latent",
                         trust_remote_code=False, revision=None)


def _moe_rows(cfg: ModelConfig, phase: str, batch: int, seq: int, **par):
    a = LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(**par)) if par else LLMAnalysis(cfg, GPU)
    rows = a.operators(phase, batch, seq, per_layer=True)
    return a, [r for r in rows if r["group"] in ("experts", "router", "communication")
               and r["name"] != "tp_all_reduce_embedding"]


def test_family_reads_the_latent_width():
    cfg = _ours()
    assert cfg.moe_latent_dim == L and cfg.expert_io_dim == L
    assert _ours({**TINY, "moe_latent_size": None}).moe_latent_dim is None  # Nano / Lightning spell it null


def test_parameters_by_hand():
    a = LLMAnalysis(_ours(), GPU)
    assert a.get_num_params_total() == TOTAL_PARAMS
    # one token uses k of the E experts; both latent projections always
    assert a.get_num_active_params_total() == TOTAL_PARAMS - ROUTED_PARAMS + ROUTED_PARAMS * K // E


def test_parameters_equal_transformers_on_meta():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(**copy.deepcopy(TINY))
    with torch.device("meta"):
        model = transformers.NemotronHForCausalLM._from_config(cfg, dtype=torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == TOTAL_PARAMS  # MTP layers are not built


@pytest.mark.parametrize("phase, batch, seq, tokens", [("prefill", BATCH, SEQ, BATCH * SEQ),
                                                       ("decode", BATCH, SEQ, BATCH)])
def test_moe_block_flops_by_hand(phase, batch, seq, tokens):
    _, rows = _moe_rows(_ours(), phase, batch, seq)
    assert sum(r["flops"] for r in rows if r["kind"] == "matmul") == moe_flops(tokens)
    by_name = {r["name"]: r for r in rows}
    assert by_name["moe_latent_in_proj"]["flops"] == 2 * tokens * H * L  # once per token, not per expert
    assert by_name["expert_up_proj"]["flops"] == 2 * tokens * K * L * F


def test_prefill_flops_equal_transformers_on_a_small_real_copy():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**copy.deepcopy(TINY))
    model = transformers.NemotronHForCausalLM._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    # fused experts run aten._grouped_mm, which torch has no FLOP formula for: the textbook one
    mapping = {getattr(torch.ops.aten, "_grouped_mm"): lambda a, b, *args, out_shape=None, **kw:
               2 * math.prod(out_shape) * a[-1]} if hasattr(torch.ops.aten, "_grouped_mm") else {}
    counter = FlopCounterMode(display=False, custom_mapping=mapping)
    ids = torch.arange(BATCH * SEQ).reshape(BATCH, SEQ) % V
    with torch.no_grad(), counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    a = LLMAnalysis(_ours(), GPU)
    rows = a.operators("prefill", BATCH, SEQ, per_layer=False)
    ours = sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention"))
    assert ours == counter.get_total_flops()


def test_tensor_parallel_replicates_the_projections_and_splits_the_experts():
    """vLLM builds fc1/fc2_latent_proj as ReplicatedLinear: every rank holds and runs them whole;
    the experts split their F columns over TP as any MoE's."""
    tokens = BATCH * SEQ
    _, rows = _moe_rows(_ours(), "prefill", BATCH, SEQ, tp_size=2)
    by_name = {r["name"]: r for r in rows}
    for name in ("moe_latent_in_proj", "moe_latent_out_proj"):
        assert by_name[name]["params_per_gpu"] == H * L
        assert by_name[name]["flops_per_gpu"] == 2 * tokens * H * L
    assert by_name["expert_up_proj"]["params_per_gpu"] == E * L * F / 2


def test_expert_parallel_dispatch_carries_the_latent():
    """The all-to-alls move each token's latent vector (not its hidden state) to its k experts."""
    tokens = BATCH * SEQ
    a, rows = _moe_rows(_ours(), "prefill", BATCH, SEQ, dp_size=2, ep_size=2)
    act_bytes = a.dtype_config.activation_bits / 8
    by_name = {r["name"]: r for r in rows}
    for name in ("ep_all_to_all_dispatch", "ep_all_to_all_combine"):
        assert by_name[name]["comm_bytes_per_gpu"] == tokens * K * L * act_bytes


def test_serving_all_to_all_bytes_per_token_carry_the_latent():
    from llm_analysis.serving.layout import all_to_all_bytes_per_token
    assert all_to_all_bytes_per_token(_ours(), 2, 4) == K * L * 2 * 3 / 4


def test_report_names_the_latent():
    from llm_analysis.report.setup_lines import setup_rows
    model_row = dict(setup_rows(LLMAnalysis(_ours(), GPU)))["model"]
    assert f"{E} experts top-{K} + 1 shared, routed in a {L}-wide latent" in model_row


def test_without_the_latent_the_block_is_unchanged():
    plain = _ours({**TINY, "moe_latent_size": None})
    _, rows = _moe_rows(plain, "prefill", BATCH, SEQ)
    assert not [r for r in rows if "latent" in r["name"]]
    tokens = BATCH * SEQ
    assert sum(r["flops"] for r in rows if r["kind"] == "matmul") == 2 * tokens * (
        H * E + K * (H * F + F * H) + (H * S + S * H))


@pytest.mark.parametrize("fields, phrase", [
    ({"moe_latent_dim": 16}, "no routed experts"),  # a dense model has no experts to project for
    ({"moe_latent_dim": 0, "moe_num_experts": 4, "moe_top_k": 2}, "moe_latent_dim"),
])
def test_latent_width_refused_where_meaningless(fields, phrase):
    with pytest.raises(ConfigError) as info:
        ModelConfig(name="x", num_layers=2, n_head=4, hidden_dim=64, vocab_size=96, **fields)
    assert phrase in str(info.value) and "moe_latent_dim" in str(info.value)


def test_training_keeps_the_two_latent_tensors():
    """Stored for backward beyond a plain MoE layer's: the experts' latent input (fc1's output) and
    their latent sum (fc2's input), s x b x L each at the activation width: replicated over TP, split
    over it with sequence parallelism."""
    from llm_analysis.quantities.activations import act_bytes, mlp_train
    from llm_analysis.schema.options import ActivationRecomputation

    def stored(cfg: ModelConfig, sp: int) -> float:
        a = LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(tp_size=2, sp_size=sp))
        return mlp_train(a, BATCH, SEQ, ActivationRecomputation.NONE, None, None, None, False, None, False, True)

    latent, plain = _ours(), _ours({**TINY, "moe_latent_size": None})
    a = LLMAnalysis(latent, GPU)
    assert stored(latent, 1) - stored(plain, 1) == 2 * BATCH * SEQ * L * act_bytes(a)
    assert stored(latent, 2) - stored(plain, 2) == 2 * BATCH * SEQ * L * act_bytes(a) / 2


@pytest.mark.parametrize("stem", ["nvidia_NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "nvidia_NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"])
def test_raw_config_json_reads_as_transformers_does(stem, monkeypatch):
    """Where transformers does not read the config (a field it refuses, or transformers missing), the
    family reads the raw file: hybrid_override_pattern (Super) and the legacy "mamba" / "attention"
    block names (Ultra) as NemotronHConfig does, so the count is the same."""
    import json
    from pathlib import Path
    import llm_analysis.hub.mapping as mapping
    raw = json.loads((Path(__file__).resolve().parents[1] / "data" / "hf_configs_aiconfigurator" / f"{stem}.json").read_text())
    read = _ours(raw)
    monkeypatch.setattr(mapping, "transformers_config", lambda *a, **k: None)
    assert _ours(raw) == read


def test_a_latent_width_transformers_refuses_is_named():
    with pytest.raises(ConfigError) as info:
        _ours({**TINY, "moe_latent_size": 1.5})
    assert "moe_latent_size" in str(info.value)
