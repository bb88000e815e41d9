"""What arrives at a deployment: closed loop (C clients, each sending its next request when the
previous one finishes, as `vllm bench serve --max-concurrency`, genai-perf and aiconfigurator's
sweeps measure) or open loop (Poisson arrivals at a request rate), and the lengths of the
requests: fixed, a distribution given by mean and spread, or a list of (input, output) pairs
(inline or a file)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from llm_analysis.errors import ConfigError
from llm_analysis.serving.conversations import conversation_pairs, is_conversation_list
from llm_analysis.schema.options import MAX_BATCH_SIZE, MAX_SEQ_LEN, integer, positive_number

MAX_REQUEST_RATE = 1e9  # requests per second: a sanity bound
_PAIRS_FORMAT = ("a list of [input_len, output_len] pairs: a .json list of pairs or of objects with input_len and "
                 "output_len, a .jsonl file of such objects, or a .csv with input_len,output_len columns; or a "
                 "ShareGPT-style conversation file with its tokenizer: {'file': path, 'tokenizer': name}")


@dataclass(frozen=True)
class Lengths:
    """Input and output lengths in tokens: fixed (spread 0), uniform over mean +- spread (as
    `vllm bench serve --random-range-ratio` draws them), or drawn from a list of pairs."""

    input_mean: float
    input_spread: int
    output_mean: float
    output_spread: int
    pairs: Optional[np.ndarray] = None  # [n, 2] (input, output) to draw from, uniformly

    @property
    def fixed(self) -> bool:
        return self.pairs is None and self.input_spread == 0 and self.output_spread == 0

    @property
    def max_input(self) -> int:
        return int(self.pairs[:, 0].max()) if self.pairs is not None else int(self.input_mean) + self.input_spread

    @property
    def max_output(self) -> int:
        return int(self.pairs[:, 1].max()) if self.pairs is not None else int(self.output_mean) + self.output_spread

    @property
    def max_total(self) -> int:
        if self.pairs is not None:
            return int((self.pairs[:, 0] + self.pairs[:, 1]).max())
        return self.max_input + self.max_output

    def draw(self, rng: np.random.Generator, n: int) -> Tuple[np.ndarray, np.ndarray]:
        """n (input, output) lengths."""
        if self.pairs is not None:
            rows = self.pairs[rng.integers(0, len(self.pairs), n)]
            return rows[:, 0].copy(), rows[:, 1].copy()
        i, o = int(self.input_mean), int(self.output_mean)
        inputs = rng.integers(i - self.input_spread, i + self.input_spread + 1, n) if self.input_spread else \
            np.full(n, i)
        outputs = rng.integers(o - self.output_spread, o + self.output_spread + 1, n) if self.output_spread else \
            np.full(n, o)
        return inputs, outputs


@dataclass(frozen=True)
class Workload:
    concurrency: Optional[int]  # closed loop
    request_rate: Optional[float]  # open loop, requests per second over the whole deployment
    lengths: Lengths

    @property
    def closed_loop(self) -> bool:
        return self.concurrency is not None


def _length(value, field: str) -> Tuple[float, int]:
    """(mean, spread) of `input_len` / `output_len`: a whole number of tokens, or a dict
    {"mean": m, "spread": s} (uniform integers over [m - s, m + s])."""
    if isinstance(value, dict):
        unknown = set(value) - {"mean", "spread"}
        if unknown or "mean" not in value:
            raise ConfigError(f"{field} = {value!r} must be a number of tokens or {{'mean': m, 'spread': s}} "
                              f"(uniform over m - s .. m + s)")
        mean = integer(value["mean"], f"{field}['mean']", 1, MAX_SEQ_LEN)
        spread = integer(value.get("spread", 0), f"{field}['spread']", 0, MAX_SEQ_LEN)
        if spread >= mean:
            raise ConfigError(f"{field}['spread'] = {value['spread']!r} must be an integer in [0, {mean - 1}], "
                              f"below the mean {mean} (lengths are uniform over mean - spread .. mean + spread, each "
                              "at least 1 token)")
        return float(mean), spread
    return float(integer(value, field, 1, MAX_SEQ_LEN)), 0


def _pairs_from_file(path: Path, tokenizer=None) -> list:
    """The file's (input, output) token-length pairs: pairs as stated, or conversations counted with
    `tokenizer` (serving/conversations.py)."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"lengths = {str(path)!r} cannot be read ({err.strerror or err}); give {_PAIRS_FORMAT}") \
            from None
    try:
        if path.suffix == ".csv":
            items = [(r["input_len"], r["output_len"]) for r in csv.DictReader(text.splitlines())]
        elif path.suffix == ".jsonl":
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            items = json.loads(text)
        conversations = is_conversation_list(items)
        pairs = None if conversations else [_pair_of(item) for item in items]
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"lengths = {str(path)!r} does not parse ({type(err).__name__}: {err}); give "
                          f"{_PAIRS_FORMAT}") from None
    if conversations:
        return conversation_pairs(items, tokenizer, str(path))
    if tokenizer is not None:
        raise ConfigError(f"lengths = {str(path)!r} holds token lengths, not conversations: its tokenizer = "
                          f"{tokenizer!r} counts nothing; give the file alone")
    return pairs


def _pair_of(item) -> tuple:
    if isinstance(item, dict):
        return item["input_len"], item["output_len"]
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return tuple(item)
    raise ValueError(f"{item!r} is not a pair")


def _pairs(value) -> np.ndarray:
    source = value
    if isinstance(value, dict):  # a file and the tokenizer its conversations are counted with
        unknown = set(value) - {"file", "tokenizer"}
        if unknown or "file" not in value or not isinstance(value["file"], (str, Path)):
            raise ConfigError(f"lengths = {value!r} must be {{'file': path, 'tokenizer': name}} (a conversation "
                              f"file and the tokenizer that counts its tokens), or {_PAIRS_FORMAT}")
        value = _pairs_from_file(Path(value["file"]), value.get("tokenizer"))
    elif isinstance(value, (str, Path)):
        value = _pairs_from_file(Path(value))
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) == 0:
        raise ConfigError(f"lengths = {source!r} must be {_PAIRS_FORMAT}")
    if (isinstance(value, np.ndarray) and value.ndim == 2 and value.shape[1] == 2
            and np.issubdtype(value.dtype, np.integer) and value.min() >= 1 and value.max() <= MAX_SEQ_LEN):
        # already checked pairs (the planner passes the file it read once to every serve() call): one check
        # of the whole array; any other array goes through the row-by-row check below, which names the row
        return value.astype(np.int64)
    rows = []
    for k, pair in enumerate(value.tolist() if isinstance(value, np.ndarray) else value):  # numbers, not np.int64
        if isinstance(pair, dict) and {"input_len", "output_len"} <= set(pair):  # as a .json file's objects read
            pair = (pair["input_len"], pair["output_len"])
        if not isinstance(pair, (list, tuple, np.ndarray)) or len(pair) != 2:
            raise ConfigError(f"lengths[{k}] = {pair!r} must be an (input_len, output_len) pair or an object with "
                              "input_len and output_len")
        rows.append((integer(pair[0], f"lengths[{k}] input_len", 1, MAX_SEQ_LEN),
                     integer(pair[1], f"lengths[{k}] output_len", 1, MAX_SEQ_LEN)))
    return np.array(rows, dtype=np.int64)


def make_workload(model, concurrency, request_rate, input_len, output_len, lengths) -> Workload:
    """The workload of a `serve()` call, checked: one of concurrency / request_rate, lengths that
    fit the model's context (ConfigError naming the field, the value and what is valid)."""
    return Workload(*check_load(concurrency, request_rate), make_lengths(model, input_len, output_len, lengths))


def check_load(concurrency, request_rate) -> Tuple[Optional[int], Optional[float]]:
    """(concurrency, request_rate), checked: exactly one given, each in its range."""
    if (concurrency is None) == (request_rate is None):
        given = "both" if concurrency is not None else "neither"
        raise ConfigError(f"concurrency = {concurrency!r} and request_rate = {request_rate!r}: {given} given; give "
                          "exactly one: concurrency (closed loop: clients each sending their next request when the "
                          "previous finishes) or request_rate (open loop: Poisson arrivals, requests per second)")
    if concurrency is not None:
        concurrency = integer(concurrency, "concurrency", 1, MAX_BATCH_SIZE)
    else:
        request_rate = positive_number(request_rate, "request_rate", "a request rate in requests per second",
                                       MAX_REQUEST_RATE)
    return concurrency, request_rate


# serve()'s request lengths when none are given (tokens)
DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN = 1024, 128


def make_lengths(model, input_len, output_len, lengths, names: Tuple[str, str] = ("input_len", "output_len")) \
        -> Lengths:
    """The request lengths of a `serve()` call (or of a plan on it), checked against the model's context:
    `input_len` / `output_len` (tokens, or {"mean": m, "spread": s}; None: 1024 / 128), or `lengths`
    (pairs inline, or a file of them), not both; errors name the two lengths `names` (the caller's)."""
    if lengths is not None:
        if input_len is not None or output_len is not None:
            raise ConfigError(f"lengths given with input_len = {input_len!r} / output_len = {output_len!r}: give the "
                              "pairs or the two lengths, not both")
        pairs = _pairs(lengths)
        spec = Lengths(float(pairs[:, 0].mean()), 0, float(pairs[:, 1].mean()), 0, pairs)
    else:
        # a default the caller did not give is named as one (where else would 1152 tokens come from?)
        if input_len is None:
            input_len, names = DEFAULT_INPUT_LEN, (f"{names[0]} (default {DEFAULT_INPUT_LEN})", names[1])
        if output_len is None:
            output_len, names = DEFAULT_OUTPUT_LEN, (names[0], f"{names[1]} (default {DEFAULT_OUTPUT_LEN})")
        i_mean, i_spread = _length(input_len, names[0])
        o_mean, o_spread = _length(output_len, names[1])
        spec = Lengths(i_mean, i_spread, o_mean, o_spread)
    _check_context(model, spec, names)
    return spec


def _check_context(model, spec: Lengths, names: Tuple[str, str]) -> None:
    """Engines refuse a request whose prompt and output exceed the model's context (vLLM:
    max_model_len), so does serve()."""
    limit = model.max_seq_len
    if limit is not None and spec.max_total > limit:
        what = ("the longest input_len + output_len pair" if spec.pairs is not None
                else f"{names[0]} + {names[1]}" + (" (the longest, with the spreads)" if not spec.fixed else ""))
        raise ConfigError(f"{what} = {spec.max_total} tokens exceeds {model.name}'s context max_seq_len = {limit}; "
                          f"valid: at most {limit} tokens per request")
    if model.encoder_only:
        raise ConfigError(f"{model.name} is encoder-only: it generates no tokens to serve; serve() needs a decoder")


__all__ = ["Lengths", "Workload", "check_load", "make_lengths", "make_workload"]
