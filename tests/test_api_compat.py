"""The mirrored system's API (seeds/004_*.txt) keeps working: every LLMAnalysis method
and entry point exists with the same argument names and defaults, and each view
returns the hand-derived value for a GPT-3-style layer."""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import pytest

import llm_analysis.analysis as analysis_module
from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
from llm_analysis.config import (DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.utils import _latency_to_string, _num_to_string, within_range

SEEDS = Path(__file__).resolve().parent / "data" / "mirrored"  # the mirrored API reference (SOURCE.md)


def _api_signatures():
    """(name, [(arg, default or ...)]) of every callable listed in the API reference."""
    files = sorted(SEEDS.glob("api_reference.txt")) if SEEDS.exists() else []
    if not files:
        return []
    out = []
    for line in files[0].read_text().splitlines():
        m = re.match(r"^(?:llm_analysis\.analysis\.)?(\w+)\((.*)\)\[source\]$", line.strip())
        if not m or m.group(1) in ("pformat", "total_ordering"):
            continue
        name, args = m.groups()
        # parse "a, b=1, c=Enum.X" as a Python call's keywords/args
        call = ast.parse(f"f({args})", mode="eval").body
        params = [(a.id, inspect.Parameter.empty) for a in call.args if isinstance(a, ast.Name)]
        params += [(k.arg, ast.unparse(k.value)) for k in call.keywords]
        out.append((name, params))
    return out


def _target(name):
    if hasattr(LLMAnalysis, name):
        return getattr(LLMAnalysis, name)
    if name in ("infer", "train", "get_model_config_by_name", "get_gpu_config_by_name", "get_dtype_config_by_name",
                "within_range"):
        return getattr(analysis_module, name)
    return None


# Deliberate deviations, where the mirrored default gives a silent wrong number (DESIGN §2):
# None = "take it from the model config" instead of assuming a non-gated MLP.
DELIBERATE = {("get_activation_memory_per_layer_mlp", "gated_linear_units")}


def _same_default(ours, theirs: str) -> bool:
    if theirs is inspect.Parameter.empty:
        return ours is inspect.Parameter.empty
    if isinstance(ours, DSZeRO) or isinstance(ours, ActivationRecomputation):
        return theirs.endswith(ours.name)
    if theirs.startswith(("DtypeConfig(", "ParallelismConfig(")):
        return True  # compared field by field below
    try:
        return ours == ast.literal_eval(theirs)
    except ValueError:
        return False


@pytest.mark.skipif(not SEEDS.exists(), reason="shared/seeds not present")
@pytest.mark.parametrize("name,params", _api_signatures(), ids=lambda x: x if isinstance(x, str) else "")
def test_api_reference_signature_is_kept(name, params):
    fn = _target(name)
    if fn is None:
        pytest.skip(f"{name} is not a method or entry point")  # e.g. dataclass constructors, enum helpers
    sig = inspect.signature(fn)
    ours = [p for p in sig.parameters.values() if p.name != "self"]
    names = [p.name for p in ours]
    for i, (arg, default) in enumerate(params):
        assert arg in names, f"{name}: argument {arg!r} missing"
        p = sig.parameters[arg]
        if (name, arg) not in DELIBERATE:
            assert _same_default(p.default, default), f"{name}({arg}): default {p.default!r} != API {default}"
        # positional order kept for the reference's arguments
        assert names.index(arg) == i, f"{name}: {arg!r} moved from position {i}"
    # new arguments only after the reference's ones, with defaults
    for p in ours[len(params):]:
        assert p.default is not inspect.Parameter.empty or p.kind is p.VAR_KEYWORD, f"{name}: new {p.name!r}"


def test_loss_bwd_memory_keeps_the_mirrored_signature():
    # not in the 004 reference (an older page): the mirrored system's analysis.py has
    # get_loss_bwd_memory(self, batch_size: int, seq_len: int) -> float, no defaults
    params = list(inspect.signature(LLMAnalysis.get_loss_bwd_memory).parameters.values())
    assert [p.name for p in params] == ["self", "batch_size", "seq_len"]
    assert all(p.default is inspect.Parameter.empty for p in params)


def test_the_facade_only_delegates():
    """LLMAnalysis has no base class but object, and no method of facade.py computes: no
    arithmetic, comparison or branch in any function body (argument defaults aside)."""
    assert LLMAnalysis.__mro__ == (LLMAnalysis, object)
    source = Path(inspect.getsourcefile(LLMAnalysis)).read_text()
    computing = (ast.BinOp, ast.AugAssign, ast.Compare, ast.IfExp, ast.If, ast.For, ast.While, ast.BoolOp,
                 ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)
    found = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in fn.body:
                found += [f"{fn.name}:{n.lineno}" for n in ast.walk(stmt) if isinstance(n, computing)]
    assert not found, f"logic in facade.py (move it to the folder that owns it): {found}"


def test_default_config_objects_match_the_reference():
    d = DtypeConfig()
    assert (d.name, d.weight_bits, d.activation_bits, d.embedding_bits) == ("w16a16e16", 16, 16, 16)
    p = ParallelismConfig()
    assert (p.tp_size, p.pp_size, p.dp_size, p.ep_size, p.sp_size) == (1, 1, 1, 1, 1)


# ----------------------------------------------------------------------------- views
L, H, A, V, S = 4, 12288, 96, 51200, 2048  # GPT-3 175B widths, 4 layers
GPU = GPUConfig(name="a100", mem_per_GPU_in_GB=80, hbm_bandwidth_in_GB_per_sec=2000,
                intra_node_bandwidth_in_GB_per_sec=300, intra_node_min_message_latency=8e-6, peak_fp16_TFLOPS=312)
PEAK, BW = 312e12, 2000e9


def gpt(**kw):
    return ModelConfig(name="gpt3-4l", num_layers=L, n_head=A, hidden_dim=H, vocab_size=V, max_seq_len=S,
                       qkv_bias=True, attn_out_bias=True, mlp_bias=True, **kw)


def make(tp=1, dp=1, **kw):
    return LLMAnalysis(gpt(), GPU, DtypeConfig(), ParallelismConfig(tp_size=tp, dp_size=dp), **kw)


def test_latency_views_hand_derived_compute_bound_layer():
    """b=8, s=2048: every matmul and the attention core are far above the ridge point (156),
    so their time is FLOPs / peak; norms, the activation and embedding lookups are
    memory-bound: bytes / bandwidth."""
    a, b = make(), 8
    T = b * S
    # the causal core as flash kernels execute it: S(S+1)/2 (query, key) pairs per head, not S^2 (issue 27)
    attn_flops = 2 * T * H * 3 * H + 2 * T * H * H + 2 * b * A * (S * (S + 1) // 2) * (2 * H // A)
    assert a.get_latency_fwd_per_layer_attn(b, S) == pytest.approx(attn_flops / PEAK, rel=1e-9)
    mlp_flops = 2 * T * H * 4 * H * 2
    act_bytes = (T * 4 * H + T * 4 * H) * 2  # GeLU reads and writes its 4h-wide input in 16 bits
    assert a.get_latency_fwd_per_layer_mlp(b, S) == pytest.approx(mlp_flops / PEAK + act_bytes / BW, rel=1e-9)
    assert a.get_latency_fwd_per_layernorm(b, S, dtype_bytes=2) == pytest.approx(2 * T * H * 2 / BW, rel=1e-12)
    # input embedding: word and position lookups read T x h and write T x h, 2 bytes each
    assert a.get_latency_fwd_input_embedding(b, S) == pytest.approx(2 * (2 * T * H * 2) / BW, rel=1e-9)
    assert a.get_latency_fwd_output_embedding_loss(b, S) == pytest.approx(2 * T * H * V / PEAK, rel=1e-9)
    total, parts = a.get_latency_fwd_per_layer(b, S)
    assert total == pytest.approx(sum(parts.values()))
    assert parts["attn"] == pytest.approx(a.get_latency_fwd_per_layer_attn(b, S))
    fwd, breakdown = a.get_latency_fwd(b, S)
    assert fwd == pytest.approx(sum(breakdown.values()))
    assert fwd == pytest.approx(L * total + a.get_latency_fwd_input_embedding(b, S)
                                + a.get_latency_fwd_output_embedding_loss(b, S)
                                + (2 * T * H * 2 + 2 * H * 2) / BW, rel=1e-9)  # + final LayerNorm: read, write, params
    assert a.get_latency_fwd_per_layer_shared_dp_comm() == 0.0  # DP traffic is in training()'s breakdown


def test_tp_comm_and_moe_all_to_all_views():
    a = make(tp=8)
    bytes_ = 4 * S * H * 2
    assert a.get_latency_fwd_per_tp_comm(4, S, 2) == pytest.approx(
        max(8e-6, 2 * 7 / 8 * bytes_ / 300e9 + 14 * GPU.intra_node_hop_latency), rel=1e-12)
    moe = ModelConfig(name="moe", num_layers=2, n_head=32, num_key_value_heads=8, hidden_dim=4096, vocab_size=32000,
                      ffn_embed_dim=14336, mlp_gated_linear_units=True, moe_num_experts=8, moe_top_k=2)
    m = LLMAnalysis(moe, GPU, DtypeConfig(), ParallelismConfig(ep_size=4, dp_size=4))
    msg = 1 * 512 * 2 * 4096 * 2  # tokens x top-k x hidden x 2 bytes
    one = max(8e-6, 3 / 4 * msg / 300e9 + 3 * GPU.intra_node_hop_latency)
    assert m.get_latency_fwd_per_layer_mlp_moe_alltoall(1, 512) == pytest.approx(2 * one, rel=1e-9)


def test_memory_views_hand_derived():
    a = make(tp=1, dp=8)
    assert a.get_weight_memory_last_layernorm() == 2 * H * 2
    assert a.get_activation_memory_output_embedding(2, S) == 2 * S * V * 2
    assert a.get_activation_memory_per_layernorm(2, S, dtype_bytes=4) == 2 * S * H * 4
    emb = V * H + S * H  # word + learned positions (tied head)
    assert a.get_memory_embedding() == emb * 2
    assert a.get_memory_embedding(DSZeRO.STAGE_3) == emb * 2 / 8
    opt, grad = a.get_memory_optimizer_state_and_gradient_embedding()
    assert (opt, grad) == (emb * 12, emb * 2)  # Adam: fp32 master + 2 moments; 16-bit gradients
    opt, grad = a.get_memory_optimizer_state_and_gradient_embedding(ds_zero=DSZeRO.STAGE_2)
    assert (opt, grad) == (emb * 12 / 8, emb * 2 / 8)
    opt, grad = a.get_memory_optimizer_state_and_gradient_last_layernorm(other_op_bytes=4)  # Lion
    assert (opt, grad) == (2 * H * (4 + 4), 2 * H * 2)
    layer = 12 * H * H + 13 * H  # q,k,v,o + biases, MLP 8h^2 + 5h, two LayerNorms 4h
    total, attn, mlp, ln = a.get_weight_memory_per_layer(return_breakdown=True)
    assert total == layer * 2 and ln == 4 * H * 2
    assert a.get_latency_weight_update() == pytest.approx(a.get_num_params_total() * 28 / BW, rel=1e-9)


def test_update_methods_change_the_results():
    a = make()
    per_layer = a.get_weight_memory_per_layer()
    a.update_parallelism_config(ParallelismConfig(tp_size=8))
    # matmul weights split 8 ways, biases of row-parallel layers and norms replicated
    replicated = (H + H + 4 * H) * 2  # o_proj bias, down_proj bias, two LayerNorms (weight + bias)
    assert a.get_weight_memory_per_layer() == pytest.approx((per_layer - replicated) / 8 + replicated, rel=1e-12)
    a.update_float_efficiency(0.5)
    assert a.get_TFLOPS_per_gpu() == pytest.approx(156)
    a.update_intra_node_memory_efficiency(0.8)
    a.update_inter_node_memory_efficiency(0.5)
    assert a.get_intra_node_bandwidth() == pytest.approx(240)
    assert a.get_inter_node_bandwidth() == pytest.approx(GPU.inter_node_bandwidth_in_GB_per_sec * 0.5)
    a.update_dtype_config(DtypeConfig(name="w8a16e16", weight_bits=8, weight_format="int"))
    assert a.get_weight_memory_per_layer() == pytest.approx(((per_layer - replicated) / 8 + replicated) / 2)
    a.update_gpu_config(GPU.model_copy(update=dict(hbm_bandwidth_in_GB_per_sec=4000)))
    assert a.get_gpu_hbm_bandwidth() == 4000
    a.update_model_config(gpt().model_copy(update=dict(num_layers=8)))
    assert a.get_num_params_total() == 8 * (12 * H * H + 13 * H) + V * H + S * H + 2 * H


def test_pivot_hand_derived():
    """Pivot: (weight bytes / HBM bandwidth) / (FLOPs of one token / FLOP/s)."""
    a = make()
    weights_s = a.get_num_params_total() * 2 / BW
    flops_one_token = L * (2 * (12 * H * H) + 2 * A * 1 * 1 * (2 * H // A)) + 2 * H * V
    assert a.get_pivot() == pytest.approx(weights_s / (flops_one_token / PEAK), rel=1e-9)


def test_presentation_helpers(tmp_path):
    a = make()
    s = a.inference(batch_size_per_gpu=1, seq_len=128, num_tokens_to_generate=4)
    text = a.get_readable_summary_dict(s, title="Inference")
    assert "Inference" in text and "time_per_output_token" in text
    path = a.output_summary_dict(s, str(tmp_path), print_human_readable=False, output_file_suffix="x")
    written = json.loads(Path(path).read_text())
    assert written["time_per_output_token"] == pytest.approx(s["time_per_output_token"])
    assert any(p.suffix == ".txt" for p in tmp_path.iterdir())
    desc = a.get_configs_desc()
    assert "gpt3-4l" in desc and "a100" in desc and "tp1" in desc
    a.print_config("Inference Configs")  # logs; must not raise


def test_utils_formatting():
    """The mirrored system's helpers, to the letter (llm-analysis 0.2.2, utils.py / analysis.py): counts in
    binary steps by default (2^30 -> '1.0 G'; 1,234,567 / 2^20 = 1.177 -> '1.18 M'), divisor=1000 for decimal;
    latencies from a whole unit on, seconds only above 1 s (1.0 s -> '1000.0 ms'); within_range strict."""
    assert _num_to_string(2 ** 30) == "1.0 G"
    assert _num_to_string(1_234_567) == "1.18 M"
    assert _num_to_string(1_234_567, divisor=1000) == "1.23 M"
    assert _num_to_string(None) == "None"
    assert _num_to_string(999) == "999"
    assert _latency_to_string(1.0) == "1000.0 ms"
    assert _latency_to_string(60) == "1.0 minutes"
    assert not within_range(110, 100, 0.1) and within_range(109, 100, 0.1)
    assert _latency_to_string(0.0123) == "12.3 ms"
    assert _latency_to_string(5e-6) == "5.0 us"
    assert _latency_to_string(90 * 86400) == "90.0 days"
    assert within_range(1.04, 1.0, 0.05) and not within_range(1.06, 1.0, 0.05)


def test_config_classes_take_the_reference_positional_order():
    """The reference's configs are dataclasses: DtypeConfig('w8a8e16', 8, 8, 16), GPUConfig(name, memory, HBM
    bandwidth, link bandwidth, link latency, fp16 TFLOPS), ModelConfig(name, layers, heads, hidden, vocab),
    ParallelismConfig(tp, pp, dp) raised TypeError (keywords only); a value given twice is refused by name."""
    from llm_analysis.config import GPUConfig, ModelConfig
    from llm_analysis.errors import ConfigError
    d = DtypeConfig("w8a8e16", 8, 8, 16)
    assert (d.name, d.weight_bits, d.activation_bits, d.embedding_bits) == ("w8a8e16", 8, 8, 16)
    g = GPUConfig("my-gpu", 80, 3350, 450, 8e-6, 989)
    assert (g.mem_per_GPU_in_GB, g.hbm_bandwidth_in_GB_per_sec, g.peak_fp16_TFLOPS) == (80, 3350, 989)
    m = ModelConfig("tiny", 2, 4, 64, 1000)
    assert (m.num_layers, m.n_head, m.hidden_dim, m.vocab_size) == (2, 4, 64, 1000)
    p = ParallelismConfig(2, 1, 4)
    assert (p.tp_size, p.pp_size, p.dp_size) == (2, 1, 4)
    with pytest.raises(ConfigError, match="name given both by position and by name"):
        DtypeConfig("a", 8, name="b")
    assert analysis_module.pformat is not None and analysis_module.total_ordering is not None


def test_update_gpu_config_takes_the_new_boards_node_size():
    """A GB200 NVL72 tray holds 4 GPUs, an HGX H100 node 8 (the catalogue's num_gpus_per_node): after
    update_gpu_config the analysis is the one built on the new GPU, unless the node size was given."""
    m = get_model_config_by_name("facebook_opt-1.3b")
    h100 = get_gpu_config_by_name("h100-sxm-80gb")
    fresh = LLMAnalysis(m, h100, parallelism_config=ParallelismConfig(tp_size=8))
    a = LLMAnalysis(m, get_gpu_config_by_name("gb200-nvl72-186gb"), parallelism_config=ParallelismConfig(tp_size=8))
    assert a.num_gpus_per_node == 4 and h100.num_gpus_per_node == 8
    a.update_gpu_config(h100)
    assert a.num_gpus_per_node == 8
    assert a.inference(seq_len=512)["decode_latency"] == fresh.inference(seq_len=512)["decode_latency"]
    given = LLMAnalysis(m, get_gpu_config_by_name("gb200-nvl72-186gb"), num_gpus_per_node=2)
    given.update_gpu_config(h100)
    assert given.num_gpus_per_node == 2


def test_an_achieved_rate_sets_the_efficiency_beside_it():
    """The mirrored constructor: achieved_tflops 'will override the flops_efficiency passed in' (seed 004), which
    reads as the rate over the peak: 200 / 312 on an A100's 16-bit peak, 1,000 / 1,555 GB/s of its HBM."""
    m = get_model_config_by_name("facebook_opt-1.3b")
    gpu = get_gpu_config_by_name("a100-sxm-40gb")
    assert (gpu.peak_fp16_TFLOPS, gpu.hbm_bandwidth_in_GB_per_sec) == (312, 1555)
    a = LLMAnalysis(m, gpu, achieved_tflops=200, flops_efficiency=0.5, achieved_memory_bandwidth_GBs=1000)
    assert a.flops_efficiency == pytest.approx(200 / 312, rel=1e-12)
    assert a.hbm_memory_efficiency == pytest.approx(1000 / 1555, rel=1e-12)
    s = a.inference()
    assert s["flops_efficiency"] == pytest.approx(200 / 312, rel=1e-12)
    assert a.get_TFLOPS_per_gpu() == pytest.approx(200, rel=1e-12)
    a.update_float_efficiency(0.5)  # the efficiency set last times, as in the mirrored system
    assert a.get_TFLOPS_per_gpu() == pytest.approx(156, rel=1e-12)


def test_output_summary_dict_writes_any_dict(tmp_path):
    """The mirrored output_summary_dict json.dumps whatever dict it is given: a dict of the caller's own, or a
    subset of a summary, is written as it is (a report needs a whole summary's keys; it had raised a TypeError
    from deep inside the report after writing the JSON)."""
    a = make()
    path = a.output_summary_dict({"a": 1}, str(tmp_path / "own"), print_human_readable=False)
    assert json.loads(Path(path).read_text())["a"] == 1
    s = a.inference(batch_size_per_gpu=1, seq_len=128, num_tokens_to_generate=4)
    subset = {k: s[k] for k in ("batch_size_per_gpu", "seq_len", "prefill_latency")}
    path = a.output_summary_dict(subset, str(tmp_path / "subset"), print_human_readable=True)
    assert json.loads(Path(path).read_text())["prefill_latency"] == pytest.approx(s["prefill_latency"])


@pytest.mark.parametrize("name,kw", [
    ("train", dict(model_name="facebook_opt-1.3b", gpu_name="a100-sxm-80gb", total_num_gpus=8, tp_size=2, seq_len=2048,
                   batch_size_per_gpu=2, global_batch_size=16, total_num_tokens=1e9, flops_efficiency=0.5)),
    ("infer", dict(model_name="facebook_opt-1.3b", gpu_name="a100-sxm-80gb", seq_len=512, num_tokens_to_generate=32)),
])
def test_module_level_calls_print_nothing_above_info(name, kw, capsys):
    """The mirrored system logs the report of its module-level infer() / train() at INFO (its `logger.info` of
    the summary), so log_level='ERROR' prints nothing and the call returns the summary: a script that prints
    its own output gets nothing mixed in. At INFO the report is printed; an explicit output_format still is."""
    call = getattr(analysis_module, name)
    assert list(inspect.signature(call).parameters)[:3] == ["model_name", "gpu_name", "dtype_name"]
    summary = call(**kw, log_level="ERROR")
    assert isinstance(summary, dict) and summary["num_params_total"] > 0
    assert capsys.readouterr().out == ""
    call(**kw, log_level="INFO")
    assert "facebook_opt-1.3b" in capsys.readouterr().out
    call(**kw, log_level="ERROR", output_format="json")
    assert json.loads(capsys.readouterr().out)["num_params_total"] == summary["num_params_total"]


def test_a_star_import_gives_infer_and_train():
    # the mirrored module defined infer and train at module level, so `from llm_analysis.analysis import *`
    # gave them; ours resolves them lazily (PEP 562), which a star-import sees only through __all__
    namespace = {}
    exec("from llm_analysis.analysis import *", namespace)
    assert callable(namespace["infer"]) and callable(namespace["train"]) and "LLMAnalysis" in namespace


def test_the_layernorm_latency_follows_sequence_parallelism():
    # get_latency_fwd_per_layernorm: one norm reads and writes b x s x h elements; under sequence parallelism
    # (tp 8, sp 8) a GPU normalises its 1/8 slice (as get_activation_memory_per_layernorm and the per-layer
    # breakdown count it; the mirrored system divides by sp too). Llama-2-70B (h 8192), b 4, s 1024, 2 bytes,
    # efficiency 1 on an A100-80GB (2039 GB/s): 4 x 1024 x 8192 x 2 x 2 / 8 / 2039e9 s
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-2-70b-hf"), get_gpu_config_by_name("a100-sxm-80gb"),
                    parallelism_config=ParallelismConfig(tp_size=8))
    assert a.get_latency_fwd_per_layernorm(4, 1024, 2) == pytest.approx(4 * 1024 * 8192 * 2 * 2 / 8 / 2039e9,
                                                                        rel=1e-9)
