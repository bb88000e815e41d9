"""The planner sizes a custom architecture (`analysis_class=`, docs/custom-architectures.md): every analysis a
plan builds is of that class, so its rows are what the subclass itself returns for each row's reproduce call,
and they differ from the stock plan by the architecture's own parameters.

The custom architecture is examples/custom_architecture.py's: a Llama with a bottleneck adapter after every
MLP, down-projection hidden -> r with bias and up-projection r -> hidden with bias, replicated on every
tensor-parallel rank (shard 1). Hand derivation of what it adds per layer: hidden x r + r (down) +
r x hidden + hidden (up) = 2 x hidden x r + r + hidden parameters; on a GPU holding L / pp of the L layers in
a 16-bit data type that is L / pp x (2 x hidden x r + r + hidden) x 2 bytes of weights, whatever tp is."""

from __future__ import annotations


import pytest

from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner import plan_inference, plan_training
from llm_analysis.planner.capacity import plan_capacity

from builders import custom_architecture_example  # tests/support/builders.py

MODEL = "meta-llama/Llama-3.1-8B"
GPU = "h100-sxm-80gb"
TARGETS = {"max_ttft_s": 0.5, "max_tpot_s": 0.05}
LOAD = dict(TARGETS, request_rate_per_s=3)
BYTES_16BIT = 2


EX = custom_architecture_example("custom_architecture_for_plans")
Adapter = EX.AdapterLLMAnalysis


def _adapter_params_per_layer(model_name: str) -> int:
    hidden, r = get_model_config_by_name(model_name).hidden_dim, EX.AdapterDescriber.adapter_rank
    return hidden * r + r + r * hidden + hidden  # down (weight + bias) + up (weight + bias)


def _adapter_weight_bytes_per_gpu(model_name: str, pp: int) -> float:
    layers = get_model_config_by_name(model_name).num_layers
    assert layers % pp == 0  # (every searched pp here divides the 32 / 16 layers evenly)
    return layers // pp * _adapter_params_per_layer(model_name) * BYTES_16BIT


def _rebuilt(rep, cls):
    return cls(get_model_config_by_name(rep["model_name"]), get_gpu_config_by_name(rep["gpu_name"]),
               get_dtype_config_by_name(rep["dtype_name"]), ParallelismConfig(**rep["parallelism"]),
               **rep["analysis_kwargs"])


def _run_call_text(text: str):
    """A row's reproduce call, run as the user would run it (the subclass imported under its own name)."""
    namespace = {"AdapterLLMAnalysis": Adapter, "LLMAnalysis": LLMAnalysis, "ParallelismConfig": ParallelismConfig,
                 "get_model_config_by_name": get_model_config_by_name,
                 "get_gpu_config_by_name": get_gpu_config_by_name,
                 "get_dtype_config_by_name": get_dtype_config_by_name}
    return eval(text, namespace)  # noqa: S307 (the planner's own call text)


@pytest.fixture
def built_classes(monkeypatch):
    """The class of every LLMAnalysis (or subclass) constructed while the test runs."""
    seen = []
    original = LLMAnalysis.__init__

    def recording(self, *args, **kwargs):
        seen.append(type(self))
        original(self, *args, **kwargs)

    monkeypatch.setattr(LLMAnalysis, "__init__", recording)
    return seen


# ------------------------------------------------------------------ serving, static batches


@pytest.fixture(scope="module")
def static_plans():
    kw = dict(max_batch_size=64)
    return (plan_inference(MODEL, [GPU], TARGETS, analysis_class=Adapter, **kw),
            plan_inference(MODEL, [GPU], TARGETS, **kw))


def test_a_static_row_is_what_the_subclass_returns_for_its_reproduce_call(static_plans):
    custom, _ = static_plans
    assert len(custom.rows) > 3
    for row in custom.rows:
        rep = row["reproduce"]
        assert rep["analysis_class"] == "AdapterLLMAnalysis"
        s = _rebuilt(rep, Adapter).inference(**rep["inference_kwargs"])
        for key in ("weight_memory_per_gpu", "kv_cache_memory_per_gpu", "time_to_first_token",
                    "time_per_output_token"):
            assert row["figures"][key] == s[key], (row["layout"], key)


def test_static_rows_carry_the_adapters_weights_on_every_layout(static_plans):
    """Per layout (tp, pp): custom weight bytes per GPU = stock + L / pp x adapter params x 2 bytes, with tp
    layouts among them (the adapter is replicated, so tp does not divide it)."""
    custom, stock = static_plans
    stock_by_layout = {(r["layout"]["tp"], r["layout"]["pp"], r["layout"]["ep"]): r for r in stock.rows}
    compared = set()
    for row in custom.rows:
        key = (row["layout"]["tp"], row["layout"]["pp"], row["layout"]["ep"])
        if key not in stock_by_layout:
            continue
        want = stock_by_layout[key]["figures"]["weight_memory_per_gpu"] + _adapter_weight_bytes_per_gpu(MODEL, key[1])
        assert row["figures"]["weight_memory_per_gpu"] == pytest.approx(want, rel=1e-12), key
        compared.add(key)
    assert {1, 2, 4} <= {tp for tp, _, _ in compared} and {1, 2} <= {pp for _, pp, _ in compared}
    assert "reproduce" in stock.best and "analysis_class" not in stock.best["reproduce"]  # stock rows unchanged


def test_every_analysis_of_a_static_plan_and_its_pools_is_of_the_class(built_classes):
    plan_inference(MODEL, [GPU], dict(TARGETS, request_rate_per_s=3), batching="static", disaggregate=True,
                   max_batch_size=32, max_tp=2, analysis_class=Adapter)
    assert built_classes and set(built_classes) == {Adapter}


# ------------------------------------------------------------------ serving, continuous batching


def test_a_continuous_row_is_what_its_serve_call_text_returns():
    custom = plan_inference(MODEL, [GPU], LOAD, max_tp=2, analysis_class=Adapter)
    stock = plan_inference(MODEL, [GPU], LOAD, max_tp=2)
    row = custom.best
    call = row["reproduce"]["serve_call"]
    assert call.startswith("AdapterLLMAnalysis(") and stock.best["reproduce"]["serve_call"].startswith("LLMAnalysis(")
    s = _run_call_text(call)
    for key in ("ttft_s", "tpot_s", "weight_memory_per_gpu", "num_gpus"):
        assert row["figures"][key] == s[key], key
    assert row["layout"] == stock.best["layout"]
    want = stock.best["figures"]["weight_memory_per_gpu"] + _adapter_weight_bytes_per_gpu(MODEL, 1)
    assert row["figures"]["weight_memory_per_gpu"] == pytest.approx(want, rel=1e-12)


def test_a_disaggregated_row_is_what_its_serve_call_text_returns(built_classes):
    custom = plan_inference(MODEL, [GPU], LOAD, max_tp=2, disaggregate=True, analysis_class=Adapter)
    assert set(built_classes) == {Adapter}
    rows = custom.extra["disaggregated"]["rows"]
    assert rows
    call = rows[0]["reproduce"]["serve_call"]
    assert call.startswith("AdapterLLMAnalysis(")
    s = _run_call_text(call)
    for key in ("ttft_s", "tpot_s", "requests_per_s"):
        assert rows[0]["figures"][key] == s[key], key


# ------------------------------------------------------------------ training


def test_a_training_row_is_the_subclass_and_carries_the_adapters(built_classes):
    small = "meta-llama/Llama-3.2-1B"
    kw = dict(tokens=1e9, max_gpus=8, global_batch_size=16, seq_len=2048)
    custom = plan_training(small, [GPU], analysis_class=Adapter, **kw)
    assert set(built_classes) == {Adapter}
    stock = plan_training(small, [GPU], **kw)
    stock_by_layout = {tuple(sorted(r["layout"].items())): r for r in stock.rows}
    compared = 0
    for row in custom.rows[:6]:
        rep = row["reproduce"]
        assert rep["analysis_class"] == "AdapterLLMAnalysis"
        mine = _rebuilt(rep, Adapter).training(**rep["training_kwargs"])
        for key in ("total_training_latency", "estimated_peak_memory_per_gpu", "mfu"):
            assert row["figures"][key] == mine[key], (row["layout"], key)
        plain = _rebuilt(rep, LLMAnalysis).training(**rep["training_kwargs"])
        want = plain["weight_memory_per_gpu"] + _adapter_weight_bytes_per_gpu(small, rep["parallelism"]["pp_size"]) / (
            rep["parallelism"]["dp_size"] if rep["training_kwargs"]["ds_zero"] == 3 else 1)
        assert mine["weight_memory_per_gpu"] == pytest.approx(want, rel=1e-12), row["layout"]
        same = stock_by_layout.get(tuple(sorted(row["layout"].items())))
        if same is not None:  # the same choice in the stock plan: the adapters only add memory and time
            compared += 1
            assert row["figures"]["estimated_peak_memory_per_gpu"] > same["figures"]["estimated_peak_memory_per_gpu"]
            assert row["figures"]["total_training_latency"] > same["figures"]["total_training_latency"]
    assert compared


# ------------------------------------------------------------------ capacity


def test_plan_capacity_analyses_every_layout_as_the_class(built_classes):
    args = (get_model_config_by_name(MODEL), get_gpu_config_by_name(GPU), get_dtype_config_by_name("w16a16e16"),
            2048, 256, 64)
    custom = plan_capacity(*args, analysis_class=Adapter)
    assert set(built_classes) == {Adapter} and custom["analysis_class"] == "AdapterLLMAnalysis"
    stock = {(c["tp_size"], c["pp_size"]): c for c in plan_capacity(*args)["candidates"]}
    assert "analysis_class" not in plan_capacity(*args)
    tps = set()
    for c in custom["candidates"]:
        want = stock[(c["tp_size"], c["pp_size"])]["weight_memory_per_gpu"] + \
            _adapter_weight_bytes_per_gpu(MODEL, c["pp_size"])
        assert c["weight_memory_per_gpu"] == pytest.approx(want, rel=1e-12), (c["tp_size"], c["pp_size"])
        tps.add(c["tp_size"])
    assert len(tps) > 1


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize("call", [
    lambda m: plan_inference(m, [GPU], TARGETS),
    lambda m: plan_training(m, [GPU], tokens=1e9, max_gpus=8, global_batch_size=16, seq_len=2048),
    lambda m: plan_capacity(m, get_gpu_config_by_name(GPU), get_dtype_config_by_name("w16a16e16"), 2048, 256, 8),
], ids=["inference", "training", "capacity"])
def test_an_analysis_given_as_the_model_points_to_analysis_class(call):
    with pytest.raises(ConfigError, match=r"model = AdapterLLMAnalysis .*analysis_class=AdapterLLMAnalysis"):
        call(Adapter)
    instance = Adapter(get_model_config_by_name(MODEL), get_gpu_config_by_name(GPU))
    with pytest.raises(ConfigError, match=r"AdapterLLMAnalysis instance.*\.model_config.*analysis_class="
                                          r"AdapterLLMAnalysis"):
        call(instance)


@pytest.mark.parametrize("call", [
    lambda c: plan_inference(MODEL, [GPU], TARGETS, analysis_class=c),
    lambda c: plan_training(MODEL, [GPU], tokens=1e9, max_gpus=8, global_batch_size=16, seq_len=2048,
                            analysis_class=c),
    lambda c: plan_capacity(get_model_config_by_name(MODEL), get_gpu_config_by_name(GPU),
                            get_dtype_config_by_name("w16a16e16"), 2048, 256, 8, analysis_class=c),
], ids=["inference", "training", "capacity"])
@pytest.mark.parametrize("bad", ["AdapterLLMAnalysis", object, EX.AdapterDescriber, None])
def test_an_analysis_class_that_is_not_an_llmanalysis_class_is_refused_by_name(call, bad):
    with pytest.raises(ConfigError) as err:
        call(bad)
    text = str(err.value)
    assert text.startswith(f"analysis_class = {bad!r} ") and "LLMAnalysis or a subclass" in text


def test_an_instance_as_analysis_class_is_refused():
    instance = Adapter(get_model_config_by_name(MODEL), get_gpu_config_by_name(GPU))
    with pytest.raises(ConfigError, match=r"^analysis_class = .*LLMAnalysis or a subclass of it \(a class, not an "
                                          r"instance"):
        plan_inference(MODEL, [GPU], TARGETS, analysis_class=instance)
