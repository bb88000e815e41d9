"""How many rows of serving_dev.csv the public interface answers when called with nothing but each row's
own words: its model path, system, precision and layout columns as written, through the call issues 25 and
26 name (`LLMAnalysis(model, gpu, dtype, ParallelismConfig(...), perf_model="calibrated")`, then
`serve(concurrency=..., input_len=..., output_len=..., framework=...)`, with `disaggregated=` pools for a
disaggregated row). It scores nothing: serving_accuracy.py and serving_layout_accuracy.py do, with their
own mapping of a row to our names; this counts what a caller without that mapping gets, and why the rest
is refused.

A row's words are taken as the csv's README states them: an empty precision is the 16-bit checkpoint
("bf16"); an empty or 0 layout column is 1 (dense models carry 1s in the moe columns, and some sources
leave them empty); moe_tp_size, when empty, is the worker's GPUs over moe_ep_size; the concurrency is
`silicon_concurrency=` of the source, else `_c<C>_` of the id, else batch_size x attention_dp_size (the
decode pool's, times its workers, for a disaggregated row): serving_layout_accuracy.py's `concurrency`.
Disaggregated rows that name no worker counts are not expected to be answered (issue 26) and are counted
apart. The closed loop's means come from the steady state alone, so by default each call is made with
`num_requests=0` (no simulated tails: the means and every refusal are the same, in seconds instead of
minutes); `--with_tails` makes the call exactly as written above (about 5 minutes on 2 cores).

    python benchmarks/serving_rows_by_name.py [--with_tails]
"""

from __future__ import annotations

import csv
import sys
import warnings
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from serving_accuracy import validation_csv  # noqa: E402
from serving_layout_accuracy import _layout, concurrency  # noqa: E402 (the columns read as both scorers read them)

from llm_analysis.analysis import LLMAnalysis  # noqa: E402
from llm_analysis.config import ParallelismConfig  # noqa: E402
from llm_analysis.errors import LLMAnalysisError  # noqa: E402


def layout(row: dict, prefix: str = "") -> ParallelismConfig:
    """The row's layout columns (`prefill_` / `decode_` ones for a pool) as written, blank or 0 as 1 and a
    blank moe_tp_size as the worker's GPUs over moe_ep_size."""
    written = _layout(row, prefix)
    given = {k: v or 1 for k, v in written.items()}
    moe_tp = written["moe_tp"] or given["tp"] * given["adp"] // given["moe_ep"]
    return ParallelismConfig(tp_size=given["tp"], attention_dp_size=given["adp"], moe_tp_size=moe_tp,
                             moe_ep_size=given["moe_ep"], pp_size=given["pp"])


_ANALYSES: dict = {}  # one analysis per setup the rows name (the rows of one setup differ in load only)


def analysis(row: dict, prefix: str = "") -> LLMAnalysis:
    words = tuple(row[c] for c in ("model_path", "system", "precision")) + tuple(
        row[prefix + c] for c in ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "pp_size"))
    if words not in _ANALYSES:
        _ANALYSES[words] = LLMAnalysis(row["model_path"], row["system"], row["precision"] or "bf16",
                                       layout(row, prefix), perf_model="calibrated")
    return _ANALYSES[words]


def answer(row: dict, with_tails: bool = False) -> None:
    """serve() for the row, called with its own words; raises what the interface raises."""
    lengths = dict(concurrency=concurrency(row), input_len=int(row["isl"]), output_len=int(row["osl"]),
                   framework=row["backend"], **({} if with_tails else {"num_requests": 0}))
    if row["mode"] == "agg":
        analysis(row).serve(**lengths)
        return
    pools = {pool: {"workers": int(row[f"{pool}_num_workers"] or 1), "parallelism": layout(row, f"{pool}_"),
                    **({"batch_size": int(row[f"{pool}_batch_size"])} if row[f"{pool}_batch_size"] else {})}
             for pool in ("prefill", "decode")}
    analysis(row, "decode_").serve(**lengths, disaggregated=pools)


def main() -> None:
    with_tails = "--with_tails" in sys.argv[1:]
    warnings.filterwarnings("ignore")
    with open(validation_csv(), newline="") as f:
        rows = list(csv.DictReader(f))
    counts, refusals = Counter(), Counter()
    for row in rows:
        kind = row["mode"] if row["mode"] == "agg" or (row["prefill_num_workers"] and row["decode_num_workers"]) \
            else "disagg, no worker counts"
        counts[kind, "rows"] += 1
        try:
            answer(row, with_tails)
            counts[kind, "answered"] += 1
        except LLMAnalysisError as err:
            refusals[f"{kind}: {type(err).__name__}: {str(err)[:140]}"] += 1
    for kind in ("agg", "disagg", "disagg, no worker counts"):
        n, ok = counts[kind, "rows"], counts[kind, "answered"]
        print(f"{kind:26s} {ok:5d} of {n:5d} answered ({ok / max(n, 1):.1%})")
    print("refused, by reason:")
    for why, n in refusals.most_common():
        print(f"  {n:4d}  {why}")


if __name__ == "__main__":
    main()
