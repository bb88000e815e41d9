"""Engine launch arguments that reproduce a plan row: `plan infer --emit_launch vllm|sglang|trtllm`.

One worker's command line per pool (every worker of a pool runs the same command), with the
engines' own flag names, checked against their documentation and source (docs/planner.md, "Launch
arguments", cites each):

- vLLM (`vllm serve`): --tensor-parallel-size (attention tp), --data-parallel-size (attention
  replicas), --enable-expert-parallel (experts spread over all data-parallel x tensor-parallel GPUs;
  without it vLLM splits every expert over all of them), --max-num-batched-tokens,
  --max-num-seqs, --gpu-memory-utilization, --kv-cache-dtype. Each data-parallel rank is its own
  engine core with its own scheduler, so the token budget and the sequence cap are per rank, as
  serve() models them.
- SGLang (`python -m sglang.launch_server`): --tp-size (all the worker's GPUs), --dp-size with
  --enable-dp-attention (attention replicas; attention tensor parallel = tp-size / dp-size),
  --ep-size (experts over that many GPU groups; each expert split tp-size / ep-size ways),
  --chunked-prefill-size, --max-running-requests, --mem-fraction-static, --kv-cache-dtype. Under DP
  attention SGLang divides --chunked-prefill-size and --max-running-requests by --dp-size
  (server_args.py), so the per-rank values serve() models are multiplied by the replicas here.
- TensorRT-LLM (`trtllm-serve`, PyTorch backend): --tp_size (all the worker's GPUs), --ep_size,
  --max_batch_size, --max_num_tokens, --kv_cache_free_gpu_memory_fraction, and in the YAML given
  to --extra_llm_api_options: enable_attention_dp (every GPU its own attention replica:
  attention data parallel = tp_size, attention tensor parallel 1), moe_tensor_parallel_size,
  kv_cache_config.dtype; the same as LLM API keyword arguments (tensor_parallel_size,
  moe_expert_parallel_size, moe_tensor_parallel_size, enable_attention_dp, max_batch_size,
  max_num_tokens, kv_cache_config.free_gpu_memory_fraction). max_batch_size and max_num_tokens are
  taken per attention replica, as serve() models them (an assumption).

A layout an engine cannot express is refused with the reason (`engine_refusal`), never emitted
with flags that would run something else: vLLM splits experts either tensor-parallel or
expert-parallel over all of a worker's GPUs, not both; TensorRT-LLM's attention data parallelism
runs attention on one GPU per replica; no engine keeps the KV cache in fp32. Redundant expert copies
(a rack-wide worker's, planner/layouts.py) are set with each engine's load balancer: vLLM --enable-eplb
--eplb-config '{"num_redundant_experts": r}' (vllm/config/parallel.py EPLBConfig), SGLang
--ep-num-redundant-experts r (server_args.py ep_num_redundant_experts), TensorRT-LLM
moe_config.load_balancer.num_slots = experts + r (llmapi MoeConfig / MoeLoadBalancerConfig). The
planner searches only what the `framework` it times can run, so the row's own engine is always
expressible.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.catalogue.lookup import get_dtype_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.model.checkpoint_weights import stored_weights  # (re-exported: the launch's own word)

LAUNCH_ENGINES = ("vllm", "sglang", "trtllm")
_FP8_NAMES = ("fp8", "fp8_e4m3", "fp8_e5m2")
_SIXTEEN_BIT_NAMES = ("auto", "fp16", "bf16", "float16", "bfloat16", "half")
TRTLLM_EXTRA_OPTIONS_FILE = "extra_llm_api_options.yaml"


@dataclass(frozen=True)
class WorkerLaunch:
    """What a command line needs of one pool: the worker layout, how many workers, the GPUs of a
    node, and the engine settings serve() resolved (per attention replica)."""

    tp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    is_moe: bool
    workers: int
    gpus_per_node: int
    max_num_batched_tokens: int
    max_num_seqs: int
    memory_share: float
    kv_cache_dtype: str
    redundant_experts: int = 0  # copies of routed experts beside the experts (expert-parallel load balancing)
    expert_slots: int = 0  # experts + copies (TensorRT-LLM's load-balancer num_slots)
    # how the row's timed weights and the model's released checkpoint store them (`stored_weights`; None: 16-bit)
    timed_weights: Optional[str] = None
    checkpoint_weights: Optional[str] = None

    @property
    def gpus(self) -> int:
        return self.tp * self.attention_dp

    @property
    def nodes(self) -> int:
        return -(-self.gpus // self.gpus_per_node)


def check_engine(value: Any, field: str = "emit_launch") -> str:
    if value not in LAUNCH_ENGINES:
        raise ConfigError(f"{field} = {value!r} is not an engine the planner writes launch arguments for; valid: "
                          f"{', '.join(LAUNCH_ENGINES)}")
    return value


def _kv_refusal(kv: str) -> Optional[str]:
    if kv in _FP8_NAMES or kv in _SIXTEEN_BIT_NAMES:
        return None
    return f"a {kv} KV cache: the engines keep it in the model's 16-bit type or fp8, none has a flag for {kv}"


def online_quantization(engine: str, w: WorkerLaunch) -> Optional[str]:
    """The --quantization value that makes `engine` run the row's weights from the model's checkpoint: fp8
    from a 16-bit checkpoint is quantised at load by vLLM and SGLang (`--quantization fp8`, dynamic per-tensor
    scales: docs.vllm.ai features/quantization/fp8, SGLang server arguments); every other pair needs a
    checkpoint stored as timed (`weight_refusal`). A quantised checkpoint gets no flag: the engine reads its
    method from the checkpoint (quantization_config; a ModelOpt release, nvidia/*-FP8 or *-NVFP4, from its
    hf_quant_config.json: "vLLM detects ModelOpt checkpoints via hf_quant_config.json", docs.vllm.ai
    features/quantization/modelopt), and a --quantization naming another method than the checkpoint's is
    refused by vLLM at start-up."""
    if w.checkpoint_weights is None and w.timed_weights == "fp8" and engine in ("vllm", "sglang"):
        return "fp8"
    return None


def weight_refusal(engine: str, w: WorkerLaunch) -> Optional[str]:
    """Why the command would not run the weights the row was timed with, or None. The engines load a
    checkpoint's weights as it stores them (a quantised release's quantization_config decides), so the emitted
    model must store them as timed, unless the engine quantises at load (`online_quantization`)."""
    if w.timed_weights == w.checkpoint_weights or online_quantization(engine, w) is not None:
        return None
    timed, stored = w.timed_weights or "16-bit", w.checkpoint_weights or "16-bit"
    # the data-type name that times the checkpoint's own weights (catalogue/lookup.py reads "fp4" by checkpoint)
    name = {None: "bf16", "fp8": "fp8", "nvfp4": "nvfp4", "mxfp4": "fp4"}.get(w.checkpoint_weights)
    return (f"the row was timed with {timed} weights, but the model's checkpoint stores {stored} weights, which "
            f"{engine} loads as stored; plan with the checkpoint's data type (--dtype_names {name}), or give the "
            f"model of a checkpoint released in {timed}")


def engine_refusal(engine: str, worker) -> Optional[str]:
    """Why `engine` cannot run `worker`'s layout (attributes tp, attention_dp, moe_tp, moe_ep,
    is_moe), or None when it can."""
    gpus = worker.tp * worker.attention_dp
    if engine == "vllm" and worker.is_moe and worker.moe_ep not in (1, gpus):
        return (f"vLLM splits the experts either tensor-parallel over all {gpus} GPUs of the worker (moe_ep 1) or, "
                f"with --enable-expert-parallel, expert-parallel over all of them (moe_tp 1); moe_tp "
                f"{worker.moe_tp} x moe_ep {worker.moe_ep} mixes both")
    if engine == "trtllm" and worker.attention_dp > 1 and worker.tp > 1:
        return (f"TensorRT-LLM's attention data parallelism (enable_attention_dp) runs attention on one GPU per "
                f"replica (attention_dp = tensor_parallel_size); tp {worker.tp} x attention_dp {worker.attention_dp} "
                "needs attention tensor parallelism inside each replica")
    return None


def _all_to_all_timed(w: WorkerLaunch) -> bool:
    """Whether serve() times the experts' dispatch and combine as all-to-alls (serving/layout.py): experts spread
    over moe_ep > 1 GPUs of attention_dp > 1 replicas, each holding its own tokens; with one attention replica the
    tensor-parallel all-reduce already gives every GPU every token, and no all-to-all is timed."""
    return w.is_moe and w.moe_ep > 1 and w.attention_dp > 1


def _flag_args(pairs: List[Tuple[str, Any]]) -> List[str]:
    """argv of (flag, value) pairs; value True: the flag alone; None / False: left out."""
    argv: List[str] = []
    for flag, value in pairs:
        if value is None or value is False:
            continue
        argv.append(flag)
        if value is not True:
            argv.append(str(value))
    return argv


def _vllm(w: WorkerLaunch, model: str, role: Optional[str]):
    kv = "fp8" if w.kv_cache_dtype in _FP8_NAMES else None
    argv = ["vllm", "serve", model] + _flag_args([
        ("--tensor-parallel-size", w.tp),
        ("--data-parallel-size", w.attention_dp if w.attention_dp > 1 else None),
        ("--enable-expert-parallel", w.is_moe and w.moe_ep > 1),
        ("--enable-eplb", w.redundant_experts > 0),
        ("--eplb-config", json.dumps({"num_redundant_experts": w.redundant_experts}, separators=(",", ":"))
         if w.redundant_experts else None),
        ("--max-num-batched-tokens", w.max_num_batched_tokens), ("--max-num-seqs", w.max_num_seqs),
        ("--gpu-memory-utilization", w.memory_share), ("--kv-cache-dtype", kv),
        ("--quantization", online_quantization("vllm", w)),
        # the all-to-all serve() times for experts spread over data-parallel attention replicas (vLLM's default,
        # allgather_reducescatter, gathers every token on every rank): DeepEP, its high-throughput kernels for
        # prefill, low-latency for decode. Only with --data-parallel-size > 1: vLLM runs its all-to-all kernels
        # only then (FusedMoEParallelConfig.use_all2all_kernels = dp_size > 1 and use_ep, docs.vllm.ai
        # api/vllm/model_executor/layers/fused_moe/config); with one replica the experts are spread over the
        # tensor-parallel group, whose all-reduce already holds every token, as serve() times it
        ("--all2all-backend", ("deepep_low_latency" if role == "decode" else "deepep_high_throughput")
         if _all_to_all_timed(w) else None),
        ("--kv-transfer-config", None if role is None else
         json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":")))])
    notes = []
    if w.nodes > 1:
        notes.append(f"the worker spans {w.nodes} nodes: start it on each with vLLM's multi-node data-parallel "
                     "options (head address, local data-parallel size, node rank)")
    if role is not None:
        notes.append("vLLM's disaggregated prefill: both pools move the KV cache through the NIXL connector; a proxy "
                     "in front sends each request to a prefill worker, then to a decode worker (not emitted)")
    return argv, None, notes


def _sglang(w: WorkerLaunch, model: str, role: Optional[str]):
    dp_attention = w.attention_dp > 1
    kv = "fp8_e4m3" if w.kv_cache_dtype in _FP8_NAMES else None
    argv = ["python", "-m", "sglang.launch_server", "--model-path", model] + _flag_args([
        ("--tp-size", w.gpus), ("--dp-size", w.attention_dp if dp_attention else None),
        ("--enable-dp-attention", dp_attention), ("--ep-size", w.moe_ep if w.is_moe and w.moe_ep > 1 else None),
        ("--ep-num-redundant-experts", w.redundant_experts or None),
        # SGLang divides both by --dp-size under DP attention: the worker-wide values are given
        ("--chunked-prefill-size", w.max_num_batched_tokens * w.attention_dp),
        ("--max-running-requests", w.max_num_seqs * w.attention_dp),
        ("--mem-fraction-static", w.memory_share), ("--kv-cache-dtype", kv),
        ("--quantization", online_quantization("sglang", w)),
        # the all-to-all serve() times under DP attention (SGLang's default, --moe-a2a-backend none, dispatches by
        # all-reduce or all-gather, "hybrid EP and TP setups": what serve() times without DP attention): DeepEP, in
        # the mode auto picks per batch (normal for prefill, low-latency for decode)
        ("--moe-a2a-backend", "deepep" if _all_to_all_timed(w) else None),
        ("--deepep-mode", "auto" if _all_to_all_timed(w) else None),
        ("--nnodes", w.nodes if w.nodes > 1 else None), ("--disaggregation-mode", role)])
    notes = []
    if w.nodes > 1:
        notes.append(f"the worker spans {w.nodes} nodes: run the command on each with --node-rank 0..{w.nodes - 1} "
                     "and the same --dist-init-addr HOST:PORT")
    if dp_attention:
        notes.append(f"--chunked-prefill-size and --max-running-requests are the worker's: SGLang gives each of the "
                     f"{w.attention_dp} attention replicas 1/{w.attention_dp} of them")
    if role is not None:
        notes.append("a router in front pairs the pools (sglang_router.launch_router --pd-disaggregation with "
                     "each pool's URLs; not emitted)")
    return argv, None, notes


def _trtllm(w: WorkerLaunch, model: str, role: Optional[str]):
    extra: Dict[str, Any] = {}
    if w.attention_dp > 1:
        extra["enable_attention_dp"] = True
    if w.is_moe:
        extra["moe_tensor_parallel_size"] = w.moe_tp
    if w.redundant_experts:  # the load balancer's slots: experts and their copies
        extra["moe_config"] = {"load_balancer": {"num_slots": w.expert_slots}}
    if w.kv_cache_dtype in _FP8_NAMES:
        extra["kv_cache_config"] = {"dtype": "fp8"}
    if role is not None:
        extra["cache_transceiver_config"] = {"backend": "DEFAULT"}
    argv = ["trtllm-serve", model] + _flag_args([
        ("--tp_size", w.gpus), ("--ep_size", w.moe_ep if w.is_moe else None),
        ("--max_batch_size", w.max_num_seqs), ("--max_num_tokens", w.max_num_batched_tokens),
        ("--kv_cache_free_gpu_memory_fraction", w.memory_share),
        ("--extra_llm_api_options", TRTLLM_EXTRA_OPTIONS_FILE if extra else None)])
    llm_api = {"tensor_parallel_size": w.gpus, "max_batch_size": w.max_num_seqs,
               "max_num_tokens": w.max_num_batched_tokens,
               "kv_cache_config": {"free_gpu_memory_fraction": w.memory_share, **extra.get("kv_cache_config", {})}}
    if w.is_moe:
        llm_api.update(moe_expert_parallel_size=w.moe_ep, moe_tensor_parallel_size=w.moe_tp,
                       enable_attention_dp=w.attention_dp > 1)
    if w.redundant_experts:
        llm_api["moe_config"] = extra["moe_config"]
    notes = []
    if w.nodes > 1:
        notes.append(f"the worker spans {w.nodes} nodes: launch it under MPI or Slurm across them "
                     "(trtllm-llmapi-launch)")
    if role is not None:
        notes.append("the pools are joined by `trtllm-serve disaggregated -c disagg_config.yaml` (context_servers: "
                     "the prefill workers' URLs, generation_servers: the decode workers'; not emitted)")
    return argv, {"extra_llm_api_options_yaml": extra, "llm_api_kwargs": llm_api}, notes


_WRITERS = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}


def _speculative_settings(engine: str, spec: Dict[str, Any]) -> Tuple[List[str], Dict[str, Any], List[str]]:
    """(argv, TensorRT-LLM speculative_config, notes) of serve()'s `speculative` on `engine`: k tokens verified
    per step are k - 1 drafted after the last accepted one, as each engine counts its draft tokens."""
    k, method, draft = spec["draft_length"], spec.get("method", "mtp"), spec.get("draft_model")
    draft = getattr(draft, "name", draft)  # a ModelConfig: its name
    argv: List[str] = []
    trt: Dict[str, Any] = {}
    if engine == "vllm":  # SpeculativeConfig: method, num_speculative_tokens, model (a draft model's)
        config = {"method": "mtp", "num_speculative_tokens": k - 1} if method == "mtp" else \
            {"method": "draft_model", "model": draft, "num_speculative_tokens": k - 1}
        argv = ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    elif engine == "sglang":  # a chain of k - 1 draft steps (top-k 1), k tokens verified
        argv = _flag_args([("--speculative-algorithm", "EAGLE" if method == "mtp" else "STANDALONE"),
                           ("--speculative-draft-model-path", draft if method == "draft_model" else None),
                           ("--speculative-num-steps", k - 1), ("--speculative-eagle-topk", 1),
                           ("--speculative-num-draft-tokens", k)])
    else:  # TensorRT-LLM's LLM API speculative_config (MTPDecodingConfig, DraftTargetDecodingConfig)
        trt = {"decoding_type": "MTP", "num_nextn_predict_layers": k - 1} if method == "mtp" else \
            {"decoding_type": "DraftTarget", "max_draft_len": k - 1, "speculative_model_dir": draft}
    acceptance = (f"mean accepted length {spec['mean_accepted_length']}" if "mean_accepted_length" in spec
                  else f"acceptance rate {spec.get('acceptance_rate')}")
    notes = [f"speculative decoding ({method}, {k} tokens verified per step): the {acceptance} the row was timed "
             "with is the workload's, which the engine measures and no flag sets"]
    if method == "mtp":
        notes.append("multi-token prediction drafts with the checkpoint's own MTP / NextN layer: the model must ship "
                     "one (DeepSeek-V3/R1, GLM, Qwen3-Next ...)")
    return argv, trt, notes


def pool_launch(engine: str, model: str, w: WorkerLaunch, role: Optional[str] = None,
                speculative: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """One pool's launch: the worker's argv and command, the engine's config files (TensorRT-LLM), the
    worker count, notes; or `expressible` False with the reason. `speculative` (serve()'s) is set on the
    workers that decode (an aggregated pool, a decode pool)."""
    reason = engine_refusal(engine, w) or _kv_refusal(w.kv_cache_dtype) or weight_refusal(engine, w)
    base = {"engine": engine, "workers": w.workers, "gpus_per_worker": w.gpus}
    if reason is not None:
        return {**base, "expressible": False, "reason": reason}
    argv, config, notes = _WRITERS[engine](w, model, role)
    if speculative is not None and role != "prefill":
        spec_argv, trt, spec_notes = _speculative_settings(engine, speculative)
        argv = argv + spec_argv
        notes = notes + spec_notes
        if trt:
            if not config["extra_llm_api_options_yaml"]:  # the file was not named yet
                argv += ["--extra_llm_api_options", TRTLLM_EXTRA_OPTIONS_FILE]
            config["extra_llm_api_options_yaml"]["speculative_config"] = trt
            config["llm_api_kwargs"]["speculative_config"] = trt
    out = {**base, "expressible": True, "argv": argv, "command": shlex.join(argv), "notes": notes}
    if config is not None:
        out["config"] = config
    return out


def _engine_settings(fig: Dict[str, Any]) -> Dict[str, Any]:
    e = fig["engine_settings"]
    return {"max_num_batched_tokens": e["max_num_batched_tokens"], "max_num_seqs": e["max_num_seqs"],
            "memory_share": e["gpu_memory_utilization"], "kv_cache_dtype": e["kv_cache_dtype"]}


def worker_launch(layout: Dict[str, Any], workers: int, gpus_per_node: int, settings: Dict[str, Any],
                  is_moe: bool, dtype_name: str, checkpoint_weights: Optional[str]) -> WorkerLaunch:
    tp = layout["tp"]
    return WorkerLaunch(tp=tp, attention_dp=layout.get("attention_dp", 1), moe_tp=layout.get("moe_tp", tp),
                        moe_ep=layout.get("moe_ep", 1), is_moe=is_moe, workers=workers, gpus_per_node=gpus_per_node,
                        redundant_experts=layout.get("moe_redundant_experts", 0),
                        expert_slots=layout.get("moe_expert_slots", 0),
                        timed_weights=stored_weights(get_dtype_config_by_name(dtype_name)),
                        checkpoint_weights=checkpoint_weights, **settings)


def row_launch(engine: str, model: str, row: Dict[str, Any], gpus_per_node: int, is_moe: bool,
               checkpoint_weights: Optional[str] = None) -> Dict[str, Any]:
    """The launch of an aggregated row (one pool of `replicas` workers); `checkpoint_weights`: the model's
    `checkpoint_weight_format` (None: 16-bit)."""
    fig = row["figures"]
    w = worker_launch(row["layout"], fig["replicas"], gpus_per_node, _engine_settings(fig), is_moe,
                      row["layout"].get("dtype", "w16a16e16"), checkpoint_weights)  # (a row built by hand: none)
    spec = row.get("reproduce", {}).get("serve_kwargs", {}).get("speculative")  # a row built by hand has none
    out = pool_launch(engine, model, w, speculative=spec)
    if out["expressible"]:
        out["notes"] = [f"run {w.workers} such worker(s) behind a load balancer"] + out["notes"]
    if engine != row["layout"]["framework"]:
        out["timed_on"] = (f"the row was timed on {row['layout']['framework']}'s profile, not {engine}'s: its figures "
                           f"are {row['layout']['framework']}'s")
    return out


def pools_launch(engine: str, model: str, pools: Dict[str, Dict[str, Any]], gpus_per_node: int,
                 is_moe: bool, speculative: Optional[Dict[str, Any]] = None, dtype_name: str = "w16a16e16",
                 checkpoint_weights: Optional[str] = None) -> Dict[str, Any]:
    """The launch of a disaggregated row: one command per pool (`pools[name]` with layout, workers and
    engine_settings), both pools' weights of `dtype_name`."""
    out = {}
    for role, pool in pools.items():
        w = worker_launch(pool["layout"], pool["workers"], gpus_per_node, _engine_settings(pool), is_moe,
                          dtype_name, checkpoint_weights)
        out[role] = pool_launch(engine, model, w, role, speculative)
    return {"engine": engine, "pools": out, "expressible": all(p["expressible"] for p in out.values())}


def launch_lines(launch: Dict[str, Any]) -> List[str]:
    """The launch as readable lines (for the table)."""
    pools = launch.get("pools", {"": launch})
    lines = [f"launch ({launch['engine']}):"]
    if "timed_on" in launch:
        lines.append(f"  note: {launch['timed_on']}")
    for role, p in pools.items():
        head = f"  {role} pool, " if role else "  "
        if not p["expressible"]:
            lines.append(f"{head}not expressible on {p['engine']}: {p['reason']}")
            continue
        lines.append(f"{head}{p['workers']} worker(s) of {p['gpus_per_worker']} GPUs, each: {p['command']}")
        extra = p.get("config", {}).get("extra_llm_api_options_yaml")
        if extra:
            lines.append(f"    {TRTLLM_EXTRA_OPTIONS_FILE}: {json.dumps(extra)}")
        lines += [f"    note: {n}" for n in p["notes"]]
    return lines


__all__ = ["LAUNCH_ENGINES", "WorkerLaunch", "check_engine", "engine_refusal", "launch_lines", "online_quantization",
           "pool_launch", "pools_launch", "row_launch", "stored_weights", "weight_refusal"]
