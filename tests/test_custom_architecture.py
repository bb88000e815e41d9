"""The subclassing route of examples/custom_architecture.py: a Llama with a bottleneck
adapter after each MLP. Expected counts come from the real transformers Llama with
real nn.Linear adapters attached (parameters by numel, FLOPs by FlopCounterMode)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig  # noqa: E402

from builders import CUSTOM_ARCHITECTURE_EXAMPLE as EXAMPLE, custom_architecture_example  # noqa: E402

RANK = 8
_load_example = custom_architecture_example


class AdaptedMLP(torch.nn.Module):
    """The real model's MLP followed by a Houlsby adapter (applied to the MLP output)."""

    def __init__(self, mlp, hidden, rank):
        super().__init__()
        self.mlp = mlp
        self.down = torch.nn.Linear(hidden, rank, bias=True)
        self.up = torch.nn.Linear(rank, hidden, bias=True)

    def forward(self, x):
        y = self.mlp(x)
        return self.up(torch.relu(self.down(y)))


def _real_model():
    cfg = transformers.AutoConfig.for_model(
        "llama", hidden_size=64, intermediate_size=176, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=320, tie_word_embeddings=False, max_position_embeddings=128)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    for layer in model.model.layers:
        layer.mlp = AdaptedMLP(layer.mlp, 64, RANK)
    return model.eval()


def _ours(example):
    example.AdapterDescriber.adapter_rank = RANK
    m = ModelConfig(name="tiny-llama-adapter", num_layers=3, n_head=4, num_key_value_heads=2, hidden_dim=64,
                    ffn_embed_dim=176, vocab_size=320, max_seq_len=128, mlp_gated_linear_units=True,
                    activation="silu", norm_type="rmsnorm", norm_bias=False, position_embedding_type="rotary",
                    tie_word_embeddings=False)
    gpu = GPUConfig(name="g", mem_per_GPU_in_GB=80, hbm_bandwidth_in_GB_per_sec=2000,
                    intra_node_bandwidth_in_GB_per_sec=300, intra_node_min_message_latency=8e-6, peak_fp16_TFLOPS=300)
    return example.AdapterLLMAnalysis(m, gpu, DtypeConfig(), ParallelismConfig())


def test_custom_subclass_counts_match_the_real_module():
    example = _load_example()
    ours = _ours(example)
    model = _real_model()
    assert ours.get_num_params_total() == sum(p.numel() for p in model.parameters())
    x = torch.randint(0, 320, (2, 9))
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        out = model(x, use_cache=True)
    assert ours.get_num_flops_fwd_total(2, 9) == fc.get_total_flops()
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(torch.randint(0, 320, (2, 1)), past_key_values=out.past_key_values, use_cache=True)
    assert ours.get_num_flops_decode_step(2, 10) == fc.get_total_flops()


def test_adapter_shows_in_the_operator_records():
    ours = _ours(_load_example())
    names = {r["name"] for r in ours.operators("prefill", batch_size=1, seq_len=16)}
    assert {"adapter_down", "adapter_up"} <= names
    s = ours.inference(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=4)
    # the summary's count is the real module's (adapters included), not the base Llama's
    assert s["num_params_total"] == sum(p.numel() for p in _real_model().parameters())


def test_example_script_runs():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120,
                       cwd=EXAMPLE.parent)
    assert r.returncode == 0, r.stderr
    assert "adapter params per layer:         528,448" in r.stdout  # 2*4096*64 + 64 + 4096


def test_a_mirrored_get_override_is_said_to_reach_no_other_figure(caplog):
    """In the mirrored system a subclass overriding get_num_params_per_layer_mlp changed the totals built from it;
    here every figure comes from the operator description, so the totals do not move (checked) and the class is
    told so when it is defined, with the way that does reach them. A subclass that only sets describer_class
    is told nothing."""
    import logging
    from llm_analysis.analysis import LLMAnalysis
    with caplog.at_level(logging.WARNING, logger="llm_analysis"):
        class Doubled(LLMAnalysis):
            def get_num_params_per_layer_mlp(self):
                return 2 * super().get_num_params_per_layer_mlp()

        class Plain(LLMAnalysis):
            describer_class = LLMAnalysis.describer_class
    said = [r.getMessage() for r in caplog.records if "overrides" in r.getMessage()]
    assert len(said) == 1 and "Doubled overrides get_num_params_per_layer_mlp" in said[0] and "describer_class" in said[0]
    base = LLMAnalysis("facebook_opt-1.3b", "a100-sxm-40gb")
    doubled = Doubled("facebook_opt-1.3b", "a100-sxm-40gb")
    assert doubled.get_num_params_per_layer_mlp() == 2 * base.get_num_params_per_layer_mlp()
    assert doubled.inference()["num_params_total"] == base.inference()["num_params_total"]
