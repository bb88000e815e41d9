"""`llm-analysis serve --disaggregated`: the readable report's pool lines (each pool's workers, layout and
capacity, the pool that limits the deployment, the prefill queue, the KV transfer) print the figures the JSON
answer of the same command holds. The law: every figure parsed from the text equals the JSON's within half a
unit of its last printed digit. The aggregated report is pinned by tests/cli/golden/serve_llama31_70b.txt."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys

import pytest

_POOLS_8GPU = {"prefill": {"workers": 1, "parallelism": {"tp_size": 1}},
               "decode": {"workers": 2, "parallelism": {"tp_size": 2}}}
_QWEN_SMALL_DECODE = {"prefill": {"workers": 2, "parallelism": {"tp_size": 1}},
                      "decode": {"workers": 1, "parallelism": {"tp_size": 1}, "batch_size": 16}}
# 2 x 2 + 3 x 2 = 10 GPUs: more than one 8-GPU H100 node, the KV cache crosses the network
_POOLS_10GPU = {"prefill": {"workers": 2, "parallelism": {"tp_size": 2}},
                "decode": {"workers": 3, "parallelism": {"tp_size": 2}}}
_QWEN_ATTENTION_DP = {"prefill": {"workers": 2, "parallelism": {"tp_size": 1}},
                      "decode": {"workers": 1, "parallelism": {"tp_size": 2, "attention_dp_size": 2,
                                                               "moe_ep_size": 4}},
                      "kv_transfer_GB_per_s": 25}

CASES = {
    # closed loop, the one-GPU prefill pool binds; the pools' 5 GPUs share a node: NVLink
    "closed_prefill_binds": ["--model_name", "deepseek-ai/DeepSeek-V2-Lite", "--concurrency", "32", "--input_len",
                             "1024", "--output_len", "256", "--disaggregated", json.dumps(_POOLS_8GPU)],
    # open loop below capacity, a decode pool of one GPU and 16 requests binds
    "open_decode_binds": ["--model_name", "Qwen/Qwen3-30B-A3B", "--request_rate", "0.5", "--input_len", "512",
                          "--output_len", "1024", "--disaggregated", json.dumps(_QWEN_SMALL_DECODE)],
    # open loop above capacity: the queue's wait is no number
    "open_saturated": ["--model_name", "Qwen/Qwen3-30B-A3B", "--request_rate", "2", "--input_len", "512",
                       "--output_len", "1024", "--disaggregated", json.dumps(_QWEN_SMALL_DECODE)],
    "across_nodes": ["--model_name", "Qwen/Qwen3-30B-A3B", "--concurrency", "16", "--input_len", "1024",
                     "--output_len", "256", "--disaggregated", json.dumps(_POOLS_10GPU)],
    # a stated KV bandwidth, a decode worker with attention replicas and expert parallelism (its layout text)
    "stated_link": ["--model_name", "Qwen/Qwen3-30B-A3B", "--concurrency", "64", "--framework", "sglang",
                    "--disaggregated", json.dumps(_QWEN_ATTENTION_DP)],
    # one-token outputs: nothing to decode, the decode pool states no capacity
    "nothing_to_decode": ["--model_name", "deepseek-ai/DeepSeek-V2-Lite", "--request_rate", "10", "--input_len",
                          "1024", "--output_len", "1", "--disaggregated", json.dumps(_POOLS_8GPU)],
}

_NUMBER = r"[0-9.]+(?:e[+-][0-9]+)?"
_TIME = rf"{_NUMBER} (?:us|ms|s)"
_POOL = re.compile(rf"^(prefill|decode) pool: (\d+) worker\(s\) x (\d+) GPUs \((.+)\), capacity "
                   rf"(?:({_NUMBER}) requests/s|(none) \(nothing to decode\))( -- limits the deployment)?$")
_QUEUE = re.compile(rf"^prefill queue: wait (unbounded|{_TIME}), then batches of (\d+) prompt\(s\) per rank "
                    rf"taking ({_TIME})$")
_KV = re.compile(rf"^KV transfer: ({_TIME}) per request, ({_NUMBER}) MB from each prefill GPU, "
                 rf"(?:point to point over (\w+)|at the (stated) kv_transfer_GB_per_s)$")
_SATURATION = re.compile(rf"^saturation: ({_NUMBER}) requests/s")


def _serve(args, *extra):
    return _serve_cached(tuple(args) + extra)


@functools.lru_cache(maxsize=None)  # (the coverage test below reads the same answers)
def _serve_cached(args):
    argv = [sys.executable, "-m", "llm_analysis.analysis", "serve", "--gpu_name", "h100-sxm-80gb", *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _printed(text: str, scale: float = 1.0):
    """(value, half a unit of its last printed digit), both times `scale`: '74.6' -> (74.6, 0.05),
    '1.23e+03' -> (1230, 5)."""
    mantissa, _, exponent = text.partition("e")
    decimals = len(mantissa.partition(".")[2])
    power = 10.0 ** int(exponent or 0)
    return float(mantissa) * power * scale, 0.5 * 10.0 ** -decimals * power * scale


def _time_printed(text: str):
    number, unit = text.split()
    return _printed(number, {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit])


def _matches(printed, exact) -> bool:
    value, half_unit = printed
    return abs(value - exact) <= half_unit * (1 + 1e-9)


def _one(pattern, lines):
    found = [m for m in map(pattern.match, lines) if m]
    assert len(found) == 1, (pattern.pattern, lines)
    return found[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_pool_lines_print_the_json_figures(case):
    text = _serve(CASES[case]).splitlines()
    answer = json.loads(_serve(CASES[case], "--output_format", "json"))
    assert answer["disaggregated"] is True
    limiting = []
    for pool in ("prefill", "decode"):
        m = next(m for m in map(_POOL.match, text) if m and m.group(1) == pool)
        assert int(m.group(2)) == answer[f"{pool}_workers"]
        assert int(m.group(3)) == answer[f"{pool}_gpus_per_worker"]
        assert m.group(4) == answer[f"{pool}_layout"]
        capacity = answer[f"{pool}_capacity_request_rate_per_s"]
        if m.group(6):
            assert capacity is None
        else:
            assert _matches(_printed(m.group(5)), capacity), (pool, m.group(5), capacity)
        if m.group(7):
            limiting.append(pool)
    assert limiting == (["prefill", "decode"] if answer["limiting_pool"] == "both" else [answer["limiting_pool"]])
    # the pool named as limiting is the one whose capacity the report gives as the deployment's saturation
    saturation = _one(_SATURATION, text).group(1)
    bound = next(m for m in map(_POOL.match, text) if m and m.group(1) == limiting[0])
    assert bound.group(5) == saturation

    queue = _one(_QUEUE, text)
    if answer["prefill_queue_wait_s"] is None:
        assert queue.group(1) == "unbounded" and answer["saturated"]
    else:
        assert _matches(_time_printed(queue.group(1)), answer["prefill_queue_wait_s"])
    assert int(queue.group(2)) == answer["prefill_batch_size"]
    assert _matches(_time_printed(queue.group(3)), answer["prefill_batch_s"])

    kv = _one(_KV, text)
    assert _matches(_time_printed(kv.group(1)), answer["kv_transfer_s"])
    assert _matches(_printed(kv.group(2), 1e6), answer["kv_transfer_bytes_per_gpu"])
    assert (kv.group(3) or kv.group(4)) == answer["kv_transfer_link"]


def test_cases_cover_what_the_lines_can_say():
    """The cases above reach each form of the lines (else a case list edited later tests less than it says)."""
    answers = {name: json.loads(_serve(args, "--output_format", "json")) for name, args in CASES.items()}
    assert {a["limiting_pool"] for a in answers.values()} >= {"prefill", "decode"}
    assert {a["kv_transfer_link"] for a in answers.values()} >= {"nvlink", "inter_node", "stated"}
    assert any(a["prefill_queue_wait_s"] is None for a in answers.values())
    assert any(a["decode_capacity_request_rate_per_s"] is None for a in answers.values())


def test_aggregated_report_has_no_pool_lines():
    text = _serve(["--model_name", "meta-llama/Llama-3.1-8B", "--concurrency", "4", "--num_requests", "0"])
    assert not any(p.match(line) for line in text.splitlines() for p in (_POOL, _QUEUE, _KV)), text
