"""Describe a custom architecture by changing the layer description, not ten methods.

Here: a Llama model with a bottleneck adapter after every MLP (Houlsby et al. 2019,
"Parameter-Efficient Transfer Learning for NLP", arXiv 1902.00751): down-projection
hidden -> r with bias, nonlinearity, up-projection r -> hidden with bias. Only
`mlp_ops` changes; parameters, FLOPs, memory, latency and the reports follow.

Run: python examples/custom_architecture.py
"""

from __future__ import annotations

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.model import LayerDescriber


class AdapterDescriber(LayerDescriber):
    """Llama layer + a bottleneck adapter of rank `adapter_rank` after the MLP."""

    adapter_rank = 64

    def mlp_ops(self, phase, kind):
        ops = super().mlp_ops(phase, kind)
        tokens, hidden, rank = phase.tokens, self.model.hidden_dim, self.adapter_rank
        # adapters are small: replicated on every tensor-parallel rank (shard=1)
        ops.append(self.matmul_op("adapter_down", "mlp", phase, tokens, hidden, rank, bias=True))
        ops.append(self.matmul_op("adapter_up", "mlp", phase, tokens, rank, hidden, bias=True))
        return ops


class AdapterLLMAnalysis(LLMAnalysis):
    describer_class = AdapterDescriber


def main() -> None:
    model = get_model_config_by_name("meta-llama/Llama-3.1-8B")
    gpu = get_gpu_config_by_name("h100-sxm-80gb")
    base = LLMAnalysis(model, gpu)
    custom = AdapterLLMAnalysis(model, gpu)
    added = custom.get_num_params_total() - base.get_num_params_total()
    print(f"Llama-3.1-8B parameters:          {base.get_num_params_total():,}")
    print(f"with rank-64 adapters:            {custom.get_num_params_total():,} (+{added:,})")
    print(f"adapter params per layer:         {added // model.num_layers:,} = 2 x 4096 x 64 + 64 + 4096")
    fb, fc = base.get_num_flops_fwd_total(1, 2048), custom.get_num_flops_fwd_total(1, 2048)
    print(f"forward FLOPs, 2048 tokens:       {fb / 1e12:.2f} T -> {fc / 1e12:.2f} T")
    s = custom.inference(batch_size_per_gpu=8, seq_len=2048, num_tokens_to_generate=256)
    print(f"time to first token (batch 8):    {s['time_to_first_token'] * 1e3:.1f} ms")
    print(f"time per output token:            {s['time_per_output_token'] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
