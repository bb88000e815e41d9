"""How plan rows are ordered and what each row's `why` says, on rows built by hand."""

from __future__ import annotations

from llm_analysis.planner.serving import rank_rows


def _row(tokens_per_gpu, tpot_s, gpus=8):
    return {"figures": {"tokens_per_sec_per_gpu": tokens_per_gpu, "time_per_output_token": tpot_s,
                        "num_gpus": gpus, "fleet_cost_per_hour": None, "cost_per_million_tokens": None}}


def test_fleets_tied_on_the_objective_are_ordered_by_tpot_and_the_best_row_says_so():
    # at an offered load every fleet of the same GPU count delivers the same tokens/s per GPU: 320 here
    rows = rank_rows([_row(320.0, 0.048), _row(320.0, 0.039), _row(160.0, 0.020)], "tokens_per_gpu", True)
    assert [r["figures"]["time_per_output_token"] for r in rows] == [0.039, 0.048, 0.020]
    assert rows[0]["why"] == ("best generated tokens/s per GPU: 320 tokens/s; next best 320 tokens/s (+0.0%), "
                              "a tie: ranked by the lower time per output token")
    assert rows[2]["why"] == "generated tokens/s per GPU 160 tokens/s (-50.0% vs best)"


def test_no_tie_no_tie_note():
    rows = rank_rows([_row(300.0, 0.03), _row(320.0, 0.04)], "tokens_per_gpu", True)
    assert rows[0]["why"] == "best generated tokens/s per GPU: 320 tokens/s; next best 300 tokens/s (-6.2%)"
    rows = rank_rows([_row(300.0, 0.03, gpus=8), _row(320.0, 0.04, gpus=8)], "fewest_gpus", True)
    assert rows[0]["figures"]["tokens_per_sec_per_gpu"] == 320.0  # a tie on GPUs: the more tokens/s per GPU
    assert rows[0]["why"].endswith("a tie: ranked by the more generated tokens/s per GPU, then the lower time per "
                                   "output token")
