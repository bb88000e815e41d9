"""Bit-identity check for speed work: inference()/training() summaries of 39 varied setups
(dense, GQA, MoE with EP, MLA, sliding windows, Mamba-2 and Jamba mixers, cross-attention
with encoder_seq_len, pp/tp/dp/ep/cp, ZeRO, recomputation, both perf models), 150 new
shapes each (past the phase tables' FIT_AFTER / COMPILE_AFTER tiers), errors included.

    PYTHONPATH=. python benchmarks/summary_snapshot.py before.json     # before a change
    PYTHONPATH=. python benchmarks/summary_snapshot.py after.json      # after it
    python benchmarks/summary_snapshot.py --compare before.json after.json
"""
import ast, json, logging, sys
logging.disable(logging.CRITICAL)
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name, ModelConfig)
from llm_analysis.hub.mapping import map_hf_config

def hub(d, name):
    return map_hf_config(d, name=name, source="test", what=name, trust_remote_code=False, revision=None)

BART = dict(model_type="bart", d_model=1024, decoder_layers=12, encoder_layers=12, decoder_attention_heads=16,
            encoder_attention_heads=16, decoder_ffn_dim=4096, encoder_ffn_dim=4096, vocab_size=50265,
            max_position_embeddings=1024)
JAMBA = dict(model_type="jamba", hidden_size=2048, num_attention_heads=16, num_key_value_heads=8, num_hidden_layers=8,
             intermediate_size=5632, vocab_size=65536, max_position_embeddings=4096, attn_layer_period=4,
             attn_layer_offset=2, expert_layer_period=2, expert_layer_offset=1, num_experts=8,
             num_experts_per_tok=2, mamba_d_state=16, mamba_dt_rank=128)
MAMBA2 = dict(model_type="mamba2", hidden_size=2560, num_hidden_layers=16, vocab_size=50288, state_size=128,
              num_heads=80, head_dim=64, n_groups=1, chunk_size=256, expand=2)
def M(name): return get_model_config_by_name(name)
A100, H100 = "a100-sxm-80gb", "h100-sxm-80gb"
SETUPS = [
  ("opt tp2", lambda: M("facebook_opt-1.3b"), "a100-sxm-40gb", dict(tp_size=2), {}, {}, {}),
  ("llama2-7b tp4", lambda: M("NousResearch_Llama-2-7b-hf"), A100, dict(tp_size=4), {}, {}, {}),
  ("llama3-8b gqa", lambda: M("meta-llama_Llama-3.1-8B"), H100, dict(tp_size=1, dp_size=8), {}, {}, dict(ds_zero=3, activation_recomputation=2)),
  ("llama3-70b tp8 pp2", lambda: M("meta-llama_Llama-3.1-70B"), H100, dict(tp_size=8, pp_size=2, dp_size=4), {},
   dict(ds_zero=1), dict(ds_zero=1, activation_recomputation=2)),
  ("llama3-70b zero3 selrec", lambda: M("meta-llama_Llama-3.1-70B"), H100, dict(tp_size=4, dp_size=8), {},
   {}, dict(ds_zero=3, activation_recomputation=1)),
  ("mixtral ep", lambda: M("mistralai_Mixtral-8x7B-v0.1"), H100, dict(tp_size=2, dp_size=4, ep_size=4), {}, {},
   dict(ds_zero=3, activation_recomputation=2)),
  ("mixtral tp8", lambda: M("mistralai_Mixtral-8x7B-v0.1"), A100, dict(tp_size=8, dp_size=4), {}, dict(kv_cache_dtype="fp8"), dict(ds_zero=3, activation_recomputation=2)),
  ("qwen3-30b-a3b", lambda: M("Qwen_Qwen3-30B-A3B"), H100, dict(tp_size=4, dp_size=2, ep_size=2), {}, {}, {}),
  ("dsv2-lite mla", lambda: M("deepseek-ai_DeepSeek-V2-Lite"), H100, dict(tp_size=2, dp_size=2), {}, {}, dict(ds_zero=3, activation_recomputation=2)),
  ("dsv2-lite mla transformers", lambda: M("deepseek-ai_DeepSeek-V2-Lite"), H100, dict(tp_size=1), {},
   dict(conventions="transformers"), dict(activation_recomputation=1, ds_zero=1)),
  ("dsv3 ep", lambda: M("deepseek-ai_DeepSeek-V3"), H100, dict(tp_size=8, pp_size=4, dp_size=8, ep_size=8), {},
   {}, dict(ds_zero=1, activation_recomputation=2)),
  ("mistral sliding", lambda: M("mistralai_Mistral-7B-v0.1"), A100, dict(tp_size=1, dp_size=4), {}, {}, dict(ds_zero=3, activation_recomputation=2)),
  ("gemma2-9b sliding", lambda: M("google_gemma-2-9b"), H100, dict(tp_size=2, dp_size=2), {}, {}, dict(ds_zero=2, activation_recomputation=1)),
  ("gemma2-2b cp2", lambda: M("google_gemma-2-2b"), H100, dict(tp_size=1, cp_size=2, dp_size=2), {}, dict(num_tokens_to_generate=0), {}),
  ("llama3-8b cp4 a2a", lambda: M("meta-llama_Llama-3.1-8B"), H100, dict(tp_size=2, cp_size=4, cp_comm="all_to_all"),
   {}, dict(num_tokens_to_generate=0), dict(ds_zero=1, activation_recomputation=2)),
  ("falcon-7b", lambda: M("tiiuae_falcon-7b"), A100, dict(tp_size=1, dp_size=8), {}, {}, dict(ds_zero=3)),
  ("falcon-40b pp", lambda: M("tiiuae_falcon-40b"), A100, dict(tp_size=4, pp_size=4), {}, {}, {}),
  ("qwen3-0.6b", lambda: M("Qwen_Qwen3-0.6B"), A100, dict(), {}, {}, dict(activation_recomputation=1)),
  ("llama2-70b calibrated", lambda: M("meta-llama_Llama-2-70b-hf"), A100, dict(tp_size=8, dp_size=2), dict(perf_model="calibrated"),
   {}, dict(ds_zero=3, activation_recomputation=2)),
  ("llama3-8b calibrated", lambda: M("meta-llama_Llama-3.1-8B"), H100, dict(tp_size=2, dp_size=2),
   dict(perf_model="calibrated"), {}, dict(ds_zero=2)),
  ("mixtral calibrated", lambda: M("mistralai_Mixtral-8x7B-v0.1"), H100, dict(tp_size=4, ep_size=2, dp_size=2),
   dict(perf_model="calibrated"), {}, dict(ds_zero=3, activation_recomputation=2)),
  ("bart cross", lambda: hub(BART, "bart-large-ish"), A100, dict(tp_size=1), {}, dict(encoder_seq_len=300, seq_len=200),
   dict(encoder_seq_len=300)),
  ("bart cross tp2", lambda: hub(BART, "bart-large-ish"), A100, dict(tp_size=2), {}, dict(encoder_seq_len=77, num_tokens_to_generate=1),
   dict(encoder_seq_len=1000)),
  ("jamba", lambda: hub(JAMBA, "jamba-small"), H100, dict(tp_size=2), {}, {}, {}),
  ("mamba2", lambda: hub(MAMBA2, "mamba2-ish"), H100, dict(tp_size=1), {}, {}, {}),
  ("mamba2 calibrated", lambda: hub(MAMBA2, "mamba2-ish"), H100, dict(tp_size=1), dict(perf_model="calibrated"), {}, {}),
  ("llama3-405b big", lambda: M("meta-llama_Llama-3.1-405B"), H100, dict(tp_size=8, pp_size=8, dp_size=2), {},
   {}, dict(ds_zero=1, activation_recomputation=2)),
  ("llama2-7b w8a16", lambda: M("NousResearch_Llama-2-7b-hf"), A100, dict(tp_size=1, dp_size=2), dict(dtype="w8a16e16"), {}, dict(ds_zero=3, activation_recomputation=2)),
  ("mistral nemo fp8 eff", lambda: M("mistralai_Mistral-Nemo-Base-2407"), H100, dict(tp_size=2),
   dict(flops_efficiency=0.6, hbm_memory_efficiency=0.8), {}, dict(ds_zero=2, activation_recomputation=2)),
  # the calibrated model (perf_model="calibrated") on the kernel kinds and launch floors it times
  ("opt tp2 calibrated", lambda: M("facebook_opt-1.3b"), "a100-sxm-40gb", dict(tp_size=2), dict(perf_model="calibrated"),
   {}, {}),
  ("llama2-7b tp4 calibrated", lambda: M("NousResearch_Llama-2-7b-hf"), A100, dict(tp_size=4),
   dict(perf_model="calibrated"), {}, dict(activation_recomputation=1)),
  ("llama2-7b w8a16 calibrated", lambda: M("NousResearch_Llama-2-7b-hf"), A100, dict(tp_size=1, dp_size=2),
   dict(perf_model="calibrated", dtype="w8a16e16"), {}, dict(ds_zero=3, activation_recomputation=2)),
  ("llama3-8b fp8 calibrated", lambda: M("meta-llama_Llama-3.1-8B"), H100, dict(tp_size=2, dp_size=4),
   dict(perf_model="calibrated", dtype="fp8"), {}, dict(ds_zero=1)),
  ("gemma2-9b sliding calibrated", lambda: M("google_gemma-2-9b"), H100, dict(tp_size=2, dp_size=2),
   dict(perf_model="calibrated"), {}, dict(ds_zero=2, activation_recomputation=1)),
  ("falcon-40b pp calibrated", lambda: M("tiiuae_falcon-40b"), A100, dict(tp_size=4, pp_size=4),
   dict(perf_model="calibrated"), {}, {}),
  ("dsv2-lite mla calibrated", lambda: M("deepseek-ai_DeepSeek-V2-Lite"), H100, dict(tp_size=2, dp_size=2),
   dict(perf_model="calibrated"), {}, dict(ds_zero=3, activation_recomputation=2)),
  ("qwen3-0.6b calibrated eager", lambda: M("Qwen_Qwen3-0.6B"), A100, dict(),
   dict(perf_model="calibrated", kernel_launch="eager"), {}, dict(activation_recomputation=1)),
  ("bart cross calibrated", lambda: hub(BART, "bart-large-ish"), A100, dict(tp_size=2), dict(perf_model="calibrated"),
   dict(encoder_seq_len=300, seq_len=200), dict(encoder_seq_len=300)),
  ("qwen3-235b ep8", lambda: M("Qwen_Qwen3-235B-A22B"), H100, dict(tp_size=4, pp_size=2, dp_size=8, ep_size=8), {},
   {}, dict(ds_zero=1, activation_recomputation=2)),
]

def run(fn):
    try:
        r = fn()
        return {k: repr(v) for k, v in r.items()}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}

def snapshot(path: str, ncalls: int = 150) -> None:
    out = {}
    for label, mk, gpu, par, ctor, inf_kw, tr_kw in SETUPS:
        ctor = dict(ctor)
        dtype = ctor.pop("dtype", "w16a16e16")
        a = LLMAnalysis(mk(), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype), ParallelismConfig(**par),
                        **ctor)
        inf = [run(lambda: a.inference(**{**dict(batch_size_per_gpu=1 + k % 5, seq_len=128 + 7 * k,
                                                 num_tokens_to_generate=16 + k % 3 * 40), **inf_kw}))
               for k in range(ncalls)]
        tr = [run(lambda: a.training(batch_size_per_gpu=1 + k % 3, seq_len=256 + 8 * k, total_num_tokens=1e9,
                                     gradient_accumulation_steps=1 + k % 2, **tr_kw)) for k in range(ncalls)]
        tr.append(run(lambda: a.training(global_batch_size=64, seq_len=1024, total_num_tokens=1e9, **tr_kw)))
        out[label] = {"inference": inf, "training": tr}
    with open(path, "w") as f:
        json.dump(out, f)


def _close(x, y, rel: float) -> bool:
    """Two snapshot rows (or values) equal, numbers within `rel` relative (0: bit-identical);
    nested dicts (kept as their repr) are compared entry by entry."""
    if x == y:
        return True
    if rel == 0:
        return False
    if isinstance(x, str) and isinstance(y, str) and x.startswith("{") and y.startswith("{"):
        try:
            x, y = ast.literal_eval(x), ast.literal_eval(y)
        except (ValueError, SyntaxError):
            return False
    if isinstance(x, dict) and isinstance(y, dict):
        return set(x) == set(y) and all(_close(x[k], y[k], rel) for k in x)
    try:
        u, v = float(x), float(y)
    except (TypeError, ValueError):
        return False
    return abs(u - v) <= rel * max(abs(u), abs(v))


def compare(path_a: str, path_b: str, rel: float = 0.0) -> int:
    with open(path_a) as f:
        a = json.load(f)
    with open(path_b) as f:
        b = json.load(f)
    bad = 0
    for label in a:
        for what in ("inference", "training"):
            for i, (x, y) in enumerate(zip(a[label][what], b[label][what])):
                if not _close(x, y, rel):
                    bad += 1
                    if bad < 6:
                        diff = {k: (x.get(k), y.get(k)) for k in set(x) | set(y) if x.get(k) != y.get(k)}
                        print(label, what, i, list(diff.items())[:4])
    calls = sum(len(v["inference"]) + len(v["training"]) for v in a.values())
    print("setups", len(a), "calls", calls, "mismatches", bad, f"(relative tolerance {rel:g})")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 0.0))
    snapshot(sys.argv[1])
