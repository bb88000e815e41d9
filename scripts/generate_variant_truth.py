"""Regenerate tests/data/variant_truth.json.gz: the reference figures of VARIED configs.

For every model type whose default config the table path (no [exact] extra) imports
exactly (tests/architecture_coverage.py over tests/data/architecture_truth.json.gz), the
variants of scripts/architecture_variants.py are derived from that default config,
each is built on the meta device by the real transformers model, and its parameters
(per module) and the FLOPs of one prefill (batch 1, 16 tokens, FlopCounterMode) are
recorded exactly as scripts/generate_architecture_truth.py records a default config
(`llm_analysis.exact.truth.architecture_truth`). Variants transformers cannot build
are recorded with the reason; variants whose config equals an earlier one are dropped.

    python scripts/generate_variant_truth.py                    # every exact type
    python scripts/generate_variant_truth.py --types llama,bert # update some (merged)

Each result is also appended to `<out>.partial.jsonl` as it arrives; a run that was
interrupted resumes from it (the file is removed once the output is written).

tests/test_variant_coverage.py then imports every recorded variant through the table
path and requires it to be exact or refused (never silently wrong).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "tests")]
DEFAULT_OUT = ROOT / "tests" / "data" / "variant_truth.json.gz"


def _truth_of_config(config: Dict[str, Any]) -> Dict[str, Any]:
    from llm_analysis.exact.meta_model import config_object
    from llm_analysis.exact.truth import architecture_truth
    try:
        cfg = config_object(config)
        out = architecture_truth(cfg)
    except Exception as exc:  # recorded: transformers cannot build this variant
        return {"status": "unbuildable", "error": f"{type(exc).__name__}: {exc}"[:400]}
    slim(out)
    out["status"] = "ok"
    return out


def slim(truth: Dict[str, Any]) -> Dict[str, Any]:
    """Drop what the check does not read (per-layer and per-child lists, FLOPs per
    module): the comparison uses totals, layer kinds and the outside parameters."""
    for key in ("flops", "base_flops"):
        if truth.get(key):
            truth[key].pop("by_module", None)
    for key in ("params", "base_params"):
        for stack in ((truth.get(key) or {}).get("stacks") or {}).values():
            stack.pop("per_child", None)
            stack.pop("per_index", None)
    return truth


def worker_main() -> int:
    import warnings
    warnings.filterwarnings("ignore")
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(json.dumps({"result": _truth_of_config(json.loads(line))}) + "\n")
            sys.stdout.flush()
    return 0


def exact_types() -> List[str]:
    """Types the table path imports exactly on their default config."""
    from architecture_coverage import classify_all, load_truth
    return [mt for mt, o in classify_all(load_truth()).items() if o["outcome"] == "exact"]


def derive(types: List[str]) -> List[Tuple[str, str, Dict[str, Any]]]:
    """[(type, variant, config dict)] from each type's default truth config."""
    from architecture_coverage import load_truth
    from architecture_variants import variants
    from exact_coverage import _decode
    from llm_analysis.exact.meta_model import config_object
    doc = load_truth()["types"]
    jobs = []
    for mt in types:
        full = config_object(_decode(doc[mt]["config"])).to_dict()
        jobs.extend((mt, name, d) for name, d in variants(full))
    return jobs


def _resume(partial: Path, jobs):
    """Results already in the checkpoint file, and the jobs still to run."""
    results: Dict[str, Dict[str, Any]] = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                results.setdefault(rec["type"], {})[rec["variant"]] = rec["result"]
    todo = [j for j in jobs if j[1] not in results.get(j[0], {})]
    return results, todo


def run_jobs(jobs, timeout_s: float, n_workers: int, partial: Path) -> Dict[str, Dict[str, Any]]:
    """Every job's truth; each result is appended to `partial` as it arrives, so an
    interrupted run resumes where it stopped."""
    from generate_architecture_truth import Worker
    results, todo = _resume(partial, jobs)
    lock, queue = threading.Lock(), list(reversed(todo))
    jobs = todo
    sink = partial.open("a")

    def drain() -> None:
        worker = Worker(str(Path(__file__).resolve()))
        while True:
            with lock:
                if not queue:
                    break
                mt, name, d = queue.pop()
            t0 = time.perf_counter()
            res = worker.ask(json.dumps(d, default=str), timeout_s)
            if res is None:
                res = {"status": "timeout", "error": f"no answer within {timeout_s:g} s"}
                worker = Worker(str(Path(__file__).resolve()))
            with lock:
                results.setdefault(mt, {})[name] = res
                sink.write(json.dumps({"type": mt, "variant": name, "result": res}, default=str) + "\n")
                sink.flush()
                print(f"[{len(jobs) - len(queue)}/{len(jobs)}] {mt} {name}: {res['status']} "
                      f"({time.perf_counter() - t0:.1f} s) {res.get('error', '')[:120]}", flush=True)
        worker.close()

    threads = [threading.Thread(target=drain) for _ in range(n_workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sink.close()
    return results


def _dedupe(per_type: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Drop a variant whose built config equals an earlier one of its type (a key the
    config class recomputes from others, e.g. a derived head_dim)."""
    seen, out = set(), {}
    for name in sorted(per_type, key=lambda n: (n != "layers", n)):
        res = per_type[name]
        key = json.dumps(res.get("config"), sort_keys=True) if res["status"] == "ok" else None
        if key is not None and key in seen:
            continue
        seen.add(key)
        out[name] = res
    return dict(sorted(out.items()))


def read_doc(path: Path) -> Dict[str, Any]:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def write_doc(path: Path, doc: Dict[str, Any]) -> None:
    """gzip-compressed JSON (the per-variant records repeat a lot: ~20x smaller);
    mtime 0 so the same truth gives the same bytes."""
    raw = (json.dumps(doc, separators=(",", ":"), default=str) + "\n").encode()
    with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as gz:
        gz.write(raw)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per variant")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--types", default="", help="comma-separated model types (default: every type "
                    "the table path imports exactly); merged into an existing output file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main()
    import torch
    import transformers
    types = [t for t in args.types.split(",") if t] or exact_types()
    jobs = derive(types)
    print(f"{len(jobs)} variants of {len(types)} model types", flush=True)
    out = Path(args.out)
    partial = out.with_name(out.name.split(".")[0] + ".partial.jsonl")
    results = run_jobs(jobs, args.timeout, args.jobs, partial)
    doc = read_doc(out) if args.types and out.exists() else {"types": {}}
    doc["types"].update({mt: _dedupe(r) for mt, r in results.items()})
    doc.update(transformers_version=transformers.__version__, torch_version=torch.__version__,
               generator="scripts/generate_variant_truth.py", phase={"batch_size": 1, "seq_len": 16})
    doc["types"] = dict(sorted(doc["types"].items()))
    write_doc(out, doc)
    n = sum(len(v) for v in doc["types"].values())
    ok = sum(1 for v in doc["types"].values() for r in v.values() if r["status"] == "ok")
    partial.unlink()
    print(f"wrote {out}: {n} variants of {len(doc['types'])} types, {ok} buildable")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
