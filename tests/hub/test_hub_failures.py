"""The Hub path under failure (issue 13), through the real `huggingface_hub` client
in a subprocess against the loopback server of tests/support/hub_server.py (127.0.0.1 only).

Each failure must end in one clear line (a `HubImportError`, so an
`LLMAnalysisError`) naming the repository and what to do, within a bounded wait:
401 gated, 404 missing, 500 server error, a server that never answers (timeout),
a truncated or non-JSON config.json, a config that needs remote code (auto_map),
and a Hub that cannot be reached at all (one bounded, stated wait instead of
~23 s of retries).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from hub_server import FakeHub

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]
TIMEOUT_S = 3  # the timeout the client is configured with (LLM_ANALYSIS_HUB_TIMEOUT)
LIMIT_S = 40  # a client still running after this has hung (start-up of transformers included)

GPT2 = {"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 8, "vocab_size": 10, "n_positions": 16}
REMOTE = {"model_type": "acme_custom", "auto_map": {"AutoConfig": "configuration_acme.AcmeConfig"},
          "architectures": ["AcmeForCausalLM"], "hidden_size": 8}


class FailingHub(FakeHub):
    """FakeHub plus the failures a real Hub (or what stands in front of it) shows."""

    def __init__(self, repos, *, broken=(), slow=(), **kw):
        super().__init__(repos, **kw)
        self.broken, self.slow = set(broken), set(slow)
        self._release = threading.Event()

    def _handle(self, h, head):
        path = h.path
        if any(f"/{r}/" in path for r in self.broken):
            return self._error(h, 500, None, "Internal Server Error", head)
        if any(f"/{r}/" in path for r in self.slow):
            self._release.wait(60)  # never answers within the client's timeout
            return self._error(h, 504, None, "Gateway Timeout", head)
        return super()._handle(h, head)

    def stop(self):
        self._release.set()
        super().stop()


CLIENT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from hub_server import _run_op
import huggingface_hub, llm_analysis.config, llm_analysis.hub.entry  # start-up is not the wait timed
out = []
for op in json.load(sys.stdin):
    t0 = time.perf_counter()
    r = _run_op(op)
    r["elapsed_s"] = time.perf_counter() - t0
    out.append(r)
print("@@RESULTS@@" + json.dumps(out))
"""


def _env(endpoint: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_")) and "PROXY" not in k.upper()}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1", NO_PROXY="127.0.0.1,localhost",
               PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore", LLM_ANALYSIS_HUB_TIMEOUT=str(TIMEOUT_S))
    return env


def _start(ops, env) -> subprocess.Popen:
    ops_file = Path(env["HF_HOME"] + "-ops.json")
    ops_file.parent.mkdir(parents=True, exist_ok=True)
    ops_file.write_text(json.dumps(ops))
    with open(ops_file) as ops_in:
        return subprocess.Popen([sys.executable, "-c", CLIENT, str(TESTS / "support")], stdin=ops_in, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def _results(p: subprocess.Popen, n: int, limit_s: float) -> list:
    """The client's results, or a 'hang' record per op when it outlives `limit_s`."""
    try:
        out, err = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return [{"error": "hang", "mro": [], "message": f"no answer within {limit_s} s",
                 "elapsed_s": limit_s}] * n
    assert "@@RESULTS@@" in out, err[-3000:]
    return json.loads(out.split("@@RESULTS@@", 1)[1])


REPOS = {
    "acme/gpt2": {"main": {"config.json": json.dumps(GPT2).encode()}},
    "acme/gated": {"main": {"config.json": json.dumps(GPT2).encode()}},
    "acme/truncated": {"main": {"config.json": json.dumps(GPT2).encode()[:30]}},
    "acme/not-json": {"main": {"config.json": b"<html><body>Sign in</body></html>"}},
    "acme/remote-code": {"main": {"config.json": json.dumps(REMOTE).encode()}},
    "acme/broken": {"main": {"config.json": b"{}"}},
    "acme/slow": {"main": {"config.json": b"{}"}},
    "acme/cached": {"main": {"config.json": json.dumps(GPT2).encode()}},
}
CASES = ["acme/gpt2", "acme/gated", "nobody/missing", "acme/truncated", "acme/not-json", "acme/remote-code",
         "acme/broken", "acme/slow", "acme/cached"]


def _seed_cache(home: Path, repo: str, files: dict) -> None:
    """A download already in huggingface_hub's cache layout (HF_HOME/hub/models--org--name
    with refs/main naming the snapshot of that commit)."""
    from hub_server import commit_sha
    root = home / "hub" / ("models--" + repo.replace("/", "--"))
    commit = commit_sha(repo, "main")
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    for name, data in files.items():
        (root / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
        (root / "snapshots" / commit / name).write_bytes(data)


@pytest.fixture(scope="module")
def outcomes():
    """Fast cases in one client; the slow server and the unreachable Hub each in
    their own client, all three running at once (bounded by LIMIT_S each)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "hf-home"
        s = socket.socket()
        s.bind(("127.0.0.1", 0))  # a port where nothing listens: connection refused
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        s.close()
        with FailingHub(REPOS, gated={"acme/gated": {"hf_ok"}}, broken={"acme/broken", "acme/cached"}, slow={"acme/slow"},
                        max_lifetime=140) as hub:
            fast = [n for n in CASES if n != "acme/slow"]
            # a download cached earlier: the Hub's 500 falls back to it (one process
            # importing transformers is enough on a shared box)
            _seed_cache(home, "acme/cached", REPOS["acme/cached"]["main"])
            p_fast = _start([{"op": "hf", "name": n} for n in fast], _env(hub.endpoint, home))
            p_slow = _start([{"op": "hf", "name": "acme/slow"}], _env(hub.endpoint, home / "slow"))
            p_dead = _start([{"op": "hf", "name": "acme/gpt2"}], _env(dead, home / "dead"))
            out = dict(zip(fast, _results(p_fast, len(fast), LIMIT_S)))
            out["acme/slow"] = _results(p_slow, 1, LIMIT_S)[0]
            out["unreachable"] = _results(p_dead, 1, LIMIT_S)[0]
    return out


def _failed(r: dict, repo: str, *words: str) -> str:
    assert "error" in r, r
    assert "LLMAnalysisError" in r["mro"] and "HubImportError" in r["mro"], (r["error"], r["message"])
    msg = r["message"]
    assert "\n" not in msg.strip(), msg
    assert repo in msg, msg
    for w in words:
        assert w.lower() in msg.lower(), (w, msg)
    assert r["elapsed_s"] < 2 * TIMEOUT_S + 5, r["elapsed_s"]
    return msg


def test_good_repo_imports(outcomes):
    assert outcomes["acme/gpt2"]["ok"]["num_layers"] == 2


def test_gated_repo(outcomes):
    _failed(outcomes["acme/gated"], "acme/gated", "gated", "HF_TOKEN")


def test_missing_repo(outcomes):
    _failed(outcomes["nobody/missing"], "nobody/missing", "HF_TOKEN")


def test_server_error_500(outcomes):
    _failed(outcomes["acme/broken"], "acme/broken", "500", "try again")


def test_slow_server_times_out(outcomes):
    _failed(outcomes["acme/slow"], "acme/slow", "timed out", f"{TIMEOUT_S}")


def test_truncated_config(outcomes):
    _failed(outcomes["acme/truncated"], "acme/truncated", "not valid JSON")


def test_non_json_config(outcomes):
    _failed(outcomes["acme/not-json"], "acme/not-json", "not valid JSON")


def test_remote_code_config(outcomes):
    _failed(outcomes["acme/remote-code"], "acme/remote-code", "auto_map", "trust_remote_code")


def test_unreachable_hub_is_one_bounded_stated_wait(outcomes):
    _failed(outcomes["unreachable"], "acme/gpt2", "could not be reached", f"{TIMEOUT_S}")


def test_failing_hub_falls_back_to_the_cache(outcomes):
    r = outcomes["acme/cached"]
    assert r.get("ok", {}).get("num_layers") == 2, r
    assert r["elapsed_s"] < 2 * TIMEOUT_S + 5, r["elapsed_s"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon", "1e9"])
def test_bad_hub_timeout_is_refused(monkeypatch, value):
    from llm_analysis.errors import HubImportError
    from llm_analysis.hub.download import hub_timeout_s
    monkeypatch.setenv("LLM_ANALYSIS_HUB_TIMEOUT", value)
    with pytest.raises(HubImportError, match="LLM_ANALYSIS_HUB_TIMEOUT"):
        hub_timeout_s()


def test_hub_timeout_default_is_huggingface_hubs(monkeypatch):
    from huggingface_hub import constants
    from llm_analysis.hub.download import hub_timeout_s
    monkeypatch.delenv("LLM_ANALYSIS_HUB_TIMEOUT", raising=False)
    assert hub_timeout_s() == constants.HF_HUB_ETAG_TIMEOUT
    monkeypatch.setenv("LLM_ANALYSIS_HUB_TIMEOUT", "2.5")
    assert hub_timeout_s() == 2.5
