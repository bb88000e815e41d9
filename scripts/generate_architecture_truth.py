"""Regenerate tests/data/architecture_truth.json.gz from the installed transformers.

For every model type with a causal-LM or masked-LM auto class, the default config
(`AutoConfig.for_model(model_type)`; multimodal: its text config) is built on the
meta device, and its parameters (tied weights once, per module) and the FLOPs of
one prefill (batch 1, 16 tokens, FlopCounterMode on meta tensors) are recorded,
with the reason when a type cannot be built or run on meta.

Run it again after upgrading transformers:

    python scripts/generate_architecture_truth.py            # every type
    python scripts/generate_architecture_truth.py --types llama,bert   # update some

Each type runs in a worker process with a time limit (`--timeout`, seconds); a
worker that exceeds it is killed, the type is recorded as timed out and a fresh
worker continues with the next type.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "data" / "architecture_truth.json.gz"
sys.path.insert(0, str(ROOT))


# ---------------------------------------------------------------------------
# worker: reads model types on stdin, writes one JSON line per type
# ---------------------------------------------------------------------------

def _truth_of_type(model_type: str) -> Dict[str, Any]:
    from llm_analysis.exact.meta_model import config_json, config_object
    from llm_analysis.exact.truth import architecture_truth
    t0 = time.perf_counter()
    try:
        cfg = config_object({"model_type": model_type})
    except Exception as exc:
        return {"status": "no_config", "error": f"{type(exc).__name__}: {exc}"[:500]}
    try:
        out = architecture_truth(cfg)
    except Exception as exc:  # record why, keep going
        return {"status": "unbuildable", "config": config_json(cfg),
                "error": f"{type(exc).__name__}: {exc}"[:800]}
    out["status"] = "ok"
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def worker_main() -> int:
    import warnings
    warnings.filterwarnings("ignore")
    for line in sys.stdin:
        model_type = line.strip()
        if not model_type:
            continue
        result = _truth_of_type(model_type)
        sys.stdout.write(json.dumps({"model_type": model_type, "result": result}) + "\n")
        sys.stdout.flush()
    return 0


# ---------------------------------------------------------------------------
# parent: feeds types to a worker, enforces the per-type time limit
# ---------------------------------------------------------------------------

class Worker:
    """A worker process of `script --worker` (this script's by default): one request line
    in, one JSON answer line out."""

    def __init__(self, script: str = __file__) -> None:
        env = dict(os.environ, PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false")
        self.proc = subprocess.Popen([sys.executable, script, "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     cwd=str(ROOT), env=env)

    def ask(self, request: str, timeout_s: float) -> Optional[Dict[str, Any]]:
        """The worker's answer to one request line (a model type here), or None when it
        did not answer in time (then it is killed)."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(request + "\n")
        self.proc.stdin.flush()
        box: List[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not box or not box[0]:
            self.kill()
            return None
        return json.loads(box[0])["result"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


def all_model_types() -> Dict[str, str]:
    from llm_analysis.exact.meta_model import lm_model_types
    return lm_model_types()


def generate(types: List[str], timeout_s: float, log=print) -> Dict[str, Any]:
    results: Dict[str, Any] = {}
    worker = Worker()
    for i, mt in enumerate(types, 1):
        t0 = time.perf_counter()
        res = worker.ask(mt, timeout_s)
        if res is None:
            res = {"status": "timeout", "error": f"no answer within {timeout_s:g} s"}
            worker = Worker()
        results[mt] = res
        flops = res.get("flops") or {}
        log(f"[{i}/{len(types)}] {mt}: {res['status']} params={res.get('params', {}).get('total')} "
            f"flops={flops.get('total')} ({time.perf_counter() - t0:.1f} s)"
            + (f" flops_error={res['flops_error']}" if res.get("flops_error") else "")
            + (f" error={res['error'][:160]}" if res.get("error") else ""))
    worker.close()
    return results


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per model type")
    ap.add_argument("--types", default="", help="comma-separated model types (default: all); "
                    "merged into an existing output file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main()
    import torch
    import transformers
    tasks = all_model_types()
    wanted = [t for t in args.types.split(",") if t] or list(tasks)
    unknown = sorted(set(wanted) - set(tasks))
    if unknown:
        ap.error(f"not causal/masked-LM model types of transformers {transformers.__version__}: "
                 f"{unknown}")
    out = Path(args.out)
    doc = json.loads(gzip.decompress(out.read_bytes())) if args.types and out.exists() else {"types": {}}
    results = generate(wanted, args.timeout)
    for mt, res in results.items():
        res["task"] = res.get("task") or tasks[mt]
    doc.update(transformers_version=transformers.__version__, torch_version=torch.__version__,
               generator="scripts/generate_architecture_truth.py",
               phase={"batch_size": 1, "seq_len": 16})
    doc["types"] = dict(sorted({**doc["types"], **results}.items()))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress((json.dumps(doc, indent=None, separators=(",", ":"), sort_keys=False) + "\n").encode(), 9))
    counts: Dict[str, int] = {}
    for res in doc["types"].values():
        counts[res["status"]] = counts.get(res["status"], 0) + 1
    flops_ok = sum(1 for r in doc["types"].values() if r.get("flops"))
    print(f"wrote {out}: {len(doc['types'])} types {counts}; FLOPs counted for {flops_ok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
