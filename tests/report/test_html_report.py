"""`--html FILE` (report/html.py): one self-contained page for `infer`, `train` and `plan infer|train`.

The commands run as a user runs them (subprocess, `--output_format json --html page.html` in one run),
and the page is checked against that JSON:
- it is written for every command and names the model;
- it fetches nothing: no element loads a network URL (read from the markup), and in the browser
  every request the page makes stays on this machine (file:, data:, blob:);
- in headless Chromium (Debian's `chromium`; only these tests skip without it) it renders without a
  script error, shows the model name, and the numbers it shows equal the JSON's: the headline
  figures (raw and as printed with their units, parsed here), every summary value, the time and
  memory breakdowns; an operator table sorted by a real click on its header, whose rows sum to the
  JSON's phase times; the tooltip of a hovered roofline point; the Pareto front's points and labels;
- bad input: a path that cannot be written is one line naming --html and the path (exit 2), found
  before any arithmetic runs, and a write that fails half-way leaves nothing behind.

The browser is driven over the Chrome DevTools protocol on a pipe (`--remote-debugging-pipe`,
stdlib only): clicks and mouse moves are real input events.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import re
import select
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODEL = "NousResearch_Llama-2-7b-hf"
INFER = ["infer", "--model_name", MODEL, "--gpu_name", "a100-sxm-80gb", "--tp_size", "2",
         "--batch_size_per_gpu", "4", "--seq_len", "512", "--num_tokens_to_generate", "32"]
TRAIN = ["train", "--model_name", MODEL, "--gpu_name", "a100-sxm-80gb", "--tp_size", "2", "--total_num_gpus", "8",
         "--global_batch_size", "32", "--batch_size_per_gpu", "2", "--seq_len", "2048", "--total_num_tokens", "1e9",
         "--ds_zero", "1", "--activation_recomputation", "4"]
PLAN_INFER = ["plan", "infer", MODEL, "a100-sxm-80gb,h100-sxm-80gb", "--max_tpot", "50ms"]
PLAN_TRAIN = ["plan", "train", MODEL, "a100-sxm-80gb", "--total_num_tokens", "1e9", "--max_gpus", "16",
              "--global_batch_size", "64", "--seq_len", "2048"]
SERVE = ["serve", "--model_name", MODEL, "--gpu_name", "a100-sxm-80gb", "--tp_size", "2", "--concurrency", "16",
         "--input_len", "512", "--output_len", "64", "--num_requests", "400"]
ROOFLINE = ["--perf_model", "roofline"]  # without it the CLI reports expected (calibrated) times
COMMANDS = {"infer": INFER + ROOFLINE, "infer-calibrated": INFER, "train": TRAIN + ROOFLINE,
            "train-calibrated": TRAIN, "plan-infer": PLAN_INFER,
            "plan-train": PLAN_TRAIN, "serve": SERVE}


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", NO_COLOR="1", PYTHONPATH=str(REPO))
    return env


def _cli(args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llm_analysis", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """{command: (page path, the JSON the same run printed)}, one run of each command."""
    out = {}
    for name, args in COMMANDS.items():
        d = tmp_path_factory.mktemp(name)
        p = _cli([*args, "--output_format", "json", "--html", "page.html"], d)
        assert p.returncode == 0, p.stderr
        out[name] = (d / "page.html", json.loads(p.stdout))
    return out


# ---------------------------------------------------------------- the markup
@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_page_is_written_and_names_the_model(pages, name):
    path, _ = pages[name]
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    title = re.search(r"<title>(.*?)</title>", page).group(1)
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", page).group(1)
    assert MODEL in title and MODEL in h1


class _FetchFinder(HTMLParser):
    """Everything in the markup that would make a browser fetch from the network."""
    URL_ATTRS = {"src", "href", "xlink:href", "srcset", "action", "formaction", "data", "poster", "background",
                 "manifest", "ping", "longdesc"}
    NETWORK = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # http://, https://, ftp://, //host

    def __init__(self):
        super().__init__()
        self.fetches, self.css = [], []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name, value in attrs:
            if name in self.URL_ATTRS and value and self.NETWORK.match(value):
                self.fetches.append((tag, name, value))
            if name == "style" and value:
                self.css.append(value)
        if tag == "script" and "src" in a:
            self.fetches.append((tag, "src", a["src"]))
        if tag == "link" and "stylesheet" in (a.get("rel") or "").lower():
            self.fetches.append((tag, "href", a.get("href")))
        if tag in ("iframe", "object", "embed", "frame", "base"):
            self.fetches.append((tag, "", ""))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.css.append(data)


def _network_fetches(page: str):
    finder = _FetchFinder()
    finder.feed(page)
    css = "\n".join(finder.css)
    found = list(finder.fetches)
    found += re.findall(r"@import[^;]*", css)
    found += [u for u in re.findall(r"url\(\s*['\"]?([^'\")]*)", css) if not u.startswith(("#", "data:"))]
    return found


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_page_fetches_nothing(pages, name):
    page = pages[name][0].read_text(encoding="utf-8")
    assert _network_fetches(page) == []
    # the finder finds each way a page could fetch (else the assertion above could not fail)
    for bad in ('<script src="https://cdn.example.com/plot.js"></script>',
                '<link rel="stylesheet" href="https://example.com/a.css">', '<img src="//example.com/a.png">',
                '<style>@import "https://example.com/a.css";</style>',
                '<div style="background: url(https://example.com/a.png)"></div>',
                '<svg><image href="http://example.com/a.png"/></svg>'):
        assert _network_fetches(page.replace("<body>", "<body>" + bad, 1)), bad


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_page_embeds_the_json_the_same_run_printed(pages, name):
    path, printed = pages[name]
    m = re.search(r'<script type="application/json" id="summary-json">(.*?)</script>', path.read_text("utf-8"),
                  re.S)
    assert "<" not in m.group(1) and json.loads(m.group(1)) == printed


# ---------------------------------------------------------------- bad input
def _one_error_line(p) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and p.stdout == "", (p.returncode, p.stderr, p.stdout)
    return lines[0]


@pytest.mark.parametrize("args", [INFER, TRAIN, PLAN_INFER], ids=["infer", "train", "plan-infer"])
def test_a_directory_as_the_page_is_one_line_naming_html_and_the_path(tmp_path, args):
    (tmp_path / "reports").mkdir()
    line = _one_error_line(_cli([*args, "--html", "reports"], tmp_path))
    assert "--html" in line and "'reports'" in line and "directory" in line
    assert list((tmp_path / "reports").iterdir()) == []


def test_a_page_under_a_file_is_one_line_naming_html_and_the_path(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    line = _one_error_line(_cli([*INFER, "--html", "notes.txt/page.html"], tmp_path))
    assert "--html" in line and "notes.txt/page.html" in line and "not a directory" in line


def test_html_without_a_path_is_one_line(tmp_path):
    line = _one_error_line(_cli([*INFER, "--html"], tmp_path))
    assert "--html" in line and "path" in line


def test_the_path_is_checked_before_any_arithmetic(tmp_path):
    """A bad --html is reported even when the model would fail later: nothing ran first."""
    (tmp_path / "reports").mkdir()
    line = _one_error_line(_cli(["infer", "--model_name", "no-such-model-anywhere", "--html", "reports"], tmp_path))
    assert "--html" in line and "no-such-model" not in line


def test_a_write_that_fails_half_way_leaves_nothing_behind(tmp_path, monkeypatch):
    from llm_analysis.errors import ConfigError
    from llm_analysis.report.html import write_page

    def half_then_full_disk(self, text, *args, **kwargs):
        with open(self, "w", encoding="utf-8") as f:
            f.write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", half_then_full_disk)
    target = tmp_path / "page.html"
    with pytest.raises(ConfigError) as err:
        write_page(target, "<!DOCTYPE html><html>" + "x" * 10_000 + "</html>")
    assert "--html" in str(err.value) and str(target) in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- in the browser
def _chromium():
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
                None)


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4)."""

    def __init__(self, binary: str, profile: Path):
        theirs_r, ours_w = os.pipe()  # we write commands, chromium reads them on fd 3
        ours_r, theirs_w = os.pipe()  # chromium writes answers and events on fd 4

        def pipes():  # in the child: copies above the low fds first, so neither dup2 clobbers the other
            high_r, high_w = fcntl.fcntl(theirs_r, fcntl.F_DUPFD, 10), fcntl.fcntl(theirs_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe",
             "--window-size=1300,900", "--no-first-run", f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=pipes, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(theirs_r)
        os.close(theirs_w)
        self.w, self.r, self.buf, self.n, self.events = ours_w, ours_r, b"", 0, []

    def _message(self, timeout: float = 60.0) -> dict:
        while b"\0" not in self.buf:
            if not select.select([self.r], [], [], timeout)[0]:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def call(self, method: str, session: str = None, **params) -> dict:
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        while True:
            answer = self._message()
            if answer.get("id") == self.n:
                if "error" in answer:
                    raise RuntimeError(answer["error"])
                return answer.get("result", {})
            self.events.append(answer)

    def open(self, url: str) -> "Tab":
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        tab = Tab(self, session)
        for domain in ("Runtime", "Network", "Log", "Page"):
            tab.call(f"{domain}.enable")
        tab.call("Page.navigate", url=url)
        for _ in range(300):
            if tab.eval("document.readyState === 'complete' && location.protocol === 'file:'"):
                return tab
            self.call("Browser.getVersion")  # lets events arrive between polls
        raise TimeoutError(url)

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self.w)
        os.close(self.r)


class Tab:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def call(self, method: str, **params) -> dict:
        return self.browser.call(method, self.session, **params)

    def eval(self, expression: str):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")

    def events(self, method: str):
        return [e["params"] for e in self.browser.events if e.get("sessionId") == self.session
                and e.get("method") == method]

    def centre(self, selector: str):
        """Viewport coordinates of the middle of the first element `selector` finds (scrolled into view,
        its tab in front: a tab behind another draws no frames, and input events wait for one)."""
        self.call("Page.bringToFront")
        return self.eval(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            el.scrollIntoView({{block: 'center', inline: 'center'}});
            const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")

    def click(self, selector: str):
        x, y = self.centre(selector)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def hover(self, selector: str):
        x, y = self.centre(selector)
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = _chromium()
    if binary is None:
        pytest.skip("no chromium binary (Debian: apt-get install chromium): the browser checks need one")
    b = Browser(binary, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def tabs(pages, browser):
    """Each page opened in the browser: {command: (tab, JSON)}."""
    return {name: (browser.open(path.as_uri()), printed) for name, (path, printed) in pages.items()}


# a number as the page prints it, with its unit: (digits, unit); read back independently of the package
_SHOWN = re.compile(r"^\$?(-?[\d,]*\.?\d+)\s*(.*)$")
_SCALE = {"": 1, "%": 1e-2, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "minutes": 60,
          "hours": 3600, "days": 86400, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "K": 1e3,
          "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_QUANTITIES = ("tok/s", "GPU-hours", "FLOPs")


def _read_shown(text: str):
    """(value, half of the last digit shown) of '18.91 ms', '1.1 K tok/s', '8.03 G', '67.7%', '2175'."""
    digits, unit = _SHOWN.match(text.strip()).groups()
    for q in _QUANTITIES:
        unit = unit[: -len(q)].strip() if unit.endswith(q) else unit
    scale = _SCALE[unit]
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return float(digits.replace(",", "")) * scale, 0.5 * 10 ** -decimals * scale


def _assert_shows(text: str, value: float):
    shown, half_digit = _read_shown(text)
    assert abs(shown - value) <= half_digit * (1 + 1e-9), (text, value)


def _equal(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)


def test_read_shown_reads_units_and_rounding():
    assert _read_shown("18.91 ms") == pytest.approx((0.01891, 0.5e-5))
    assert _read_shown("1.1 K tok/s") == pytest.approx((1100, 50))
    assert _read_shown("1,041,719 GPU-hours") == pytest.approx((1041719, 0.5))
    with pytest.raises(AssertionError):
        _assert_shows("18.91 ms", 0.01893)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_it_renders_shows_the_model_and_fetches_nothing_in_the_browser(tabs, name):
    tab, printed = tabs[name]
    assert tab.events("Runtime.exceptionThrown") == []
    errors = [e for e in tab.events("Log.entryAdded") if e["entry"]["level"] == "error"]
    assert errors == []
    urls = [e["request"]["url"] for e in tab.events("Network.requestWillBeSent")]
    assert urls and all(u.startswith(("file:", "data:", "blob:")) for u in urls), urls
    assert MODEL in tab.eval("document.querySelector('h1').innerText")
    assert tab.eval("document.title").count(MODEL) == 1
    # the charts are laid out (a chart with no size would be an empty box)
    sizes = tab.eval("[...document.querySelectorAll('svg.chart')].map(s => s.getBoundingClientRect().width)")
    assert sizes and min(sizes) > 300
    # the script ran: the download link points at the embedded JSON
    assert tab.eval("document.getElementById('json-download').href").startswith("blob:")


@pytest.mark.parametrize("name", ["infer", "infer-calibrated", "train", "train-calibrated"])
def test_headline_figures_and_every_value_equal_the_json(tabs, name):
    tab, printed = tabs[name]
    cards = tab.eval("[...document.querySelectorAll('.card')].map(c => [c.dataset.key, c.dataset.value, "
                     "c.querySelector('.value').innerText])")
    assert len(cards) >= 6
    for key, raw, shown in cards:
        assert float(raw) == printed[key], key
        _assert_shows(shown, printed[key])
    if not tab.eval("document.getElementById('all-values').open"):
        tab.click("#all-values > summary")  # opened as a reader opens it: the table is then shown
    values = dict(tab.eval("[...document.querySelectorAll('#values tbody tr')].map(r => [r.cells[0].innerText, "
                           "r.cells[1].dataset.value === undefined ? r.cells[2].innerText : r.cells[1].dataset.value])"))
    scalars = {k: v for k, v in printed.items() if not isinstance(v, (dict, list))}
    assert set(values) == set(scalars)
    for key, value in scalars.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert float(values[key]) == value, key
        else:
            assert values[key] == str(value), key


def test_the_performance_model_is_stated(tabs):
    roofline, _ = tabs["infer"]
    calibrated, printed = tabs["infer-calibrated"]
    assert roofline.eval("document.getElementById('perf-model').dataset.perfModel") == "roofline"
    assert "lower bound" in roofline.eval("document.getElementById('perf-model').innerText")
    assert calibrated.eval("document.getElementById('perf-model').dataset.perfModel") == printed["perf_model"]
    assert "expected" in calibrated.eval("document.getElementById('perf-model').innerText")
    detail = calibrated.eval("document.querySelector('.card[data-key=prefill_latency] .detail').innerText")
    _assert_shows(detail.split("lower bound", 1)[1], printed["prefill_latency_lower_bound"])


def _column(tab, table: str, header: str):
    """(data-value, text) of every body cell of the column headed `header`, in the order shown."""
    return tab.eval(f"""(() => {{ const t = document.querySelector({json.dumps(table)});
        const i = [...t.tHead.rows[0].cells].findIndex(c => c.innerText.trim() === {json.dumps(header)});
        return [...t.tBodies[0].rows].map(r => [r.cells[i].dataset.value, r.cells[i].innerText]); }})()""")


def _click_header(tab, table: str, header: str):
    index = tab.eval(f"[...document.querySelector({json.dumps(table)}).tHead.rows[0].cells]"
                     f".findIndex(c => c.innerText.trim() === {json.dumps(header)}) + 1")
    assert index > 0, header
    tab.click(f"{table} thead th:nth-child({index})")


@pytest.mark.parametrize("name", ["infer", "infer-calibrated"])
def test_operator_tables_sort_by_a_click_and_sum_to_the_json_phase_times(tabs, name):
    tab, printed = tabs[name]
    prefill = "#operators-0"
    _click_header(tab, prefill, "time x count")
    times = [float(v) for v, _ in _column(tab, prefill, "time x count")]
    assert times == sorted(times, reverse=True) and times != sorted(times)
    _click_header(tab, prefill, "time x count")
    again = [float(v) for v, _ in _column(tab, prefill, "time x count")]
    assert again == sorted(times)
    # every shown time carries its raw number, and the rows add up to the JSON's prefill, part by part
    for raw, text in _column(tab, prefill, "time x count"):
        _assert_shows(text, float(raw))
    parts = [t for _, t in _column(tab, prefill, "part")]
    breakdown = printed["prefill_latency_breakdown"]
    assert math.isclose(sum(again), sum(g["latency_s"] for g in breakdown.values()), rel_tol=1e-9)
    assert math.isclose(sum(again), printed["prefill_latency"], rel_tol=1e-9)  # pp 1: no pipelining
    by_part = {}
    for part, t in zip(parts, again):
        by_part[part] = by_part.get(part, 0.0) + t
    assert math.isclose(by_part.pop("MLP"), breakdown["mlp"]["latency_s"], rel_tol=1e-9)
    assert math.isclose(by_part.pop("attention"), breakdown["attention"]["latency_s"], rel_tol=1e-9)
    comm = sum(g["latency_s"] for k, g in breakdown.items() if k.endswith("communication"))
    assert comm > 0 and math.isclose(by_part.pop("communication"), comm, rel_tol=1e-9)
    # a text column sorts too: A to Z on the first click
    _click_header(tab, prefill, "operator")
    names = [t for _, t in _column(tab, prefill, "operator")]
    assert names == sorted(names, key=str.lower)
    decode = [float(v) for v, _ in _column(tab, "#operators-1", "time x count")]
    assert math.isclose(sum(decode), printed["decode_first_step_latency"], rel_tol=1e-9)


def test_a_hovered_roofline_point_names_its_operator_and_figures(tabs):
    tab, _ = tabs["infer"]
    # the prefill point of one operator (points where operators coincide list them all)
    op = tab.eval("[...document.querySelectorAll('.op-point')].find(p => !p.dataset.op.includes(',') && "
                  "p.dataset.phase.startsWith('prefill')).dataset.op")
    point = f".op-point[data-op='{op}'][data-phase^='prefill']"
    assert tab.eval("document.getElementById('tooltip').hidden")
    tab.hover(point)
    assert not tab.eval("document.getElementById('tooltip').hidden")
    assert tab.eval("document.getElementById('tooltip').getBoundingClientRect().width") > 50
    tip = tab.eval("document.getElementById('tooltip').innerText")
    assert tip.split(" ", 1)[0] == op
    row = tab.eval(f"""(() => {{ const r = [...document.querySelectorAll('#operators-0 tbody tr')]
        .find(r => r.cells[0].innerText === {json.dumps(op)});
        return [...r.cells].map(c => [c.dataset.value, c.innerText]); }})()""")
    flops, moved, bound, per_call = row[4], row[5], row[7][1], row[8]
    assert f"FLOPs per GPU: {flops[1]}" in tip and f"bytes moved per GPU: {moved[1]}" in tip
    assert f"time: {per_call[1]}" in tip and f"bound: {bound}" in tip
    data = tab.eval(f"Object.assign({{}}, document.querySelector({json.dumps(point)}).dataset)")
    assert float(data["flops"]) == float(flops[0]) and float(data["timeS"]) == float(per_call[0])
    assert math.isclose(float(data["y"]), float(flops[0]) / float(per_call[0]) / 1e12, rel_tol=1e-12)
    tab.hover("h1")
    assert tab.eval("document.getElementById('tooltip').hidden")


def test_inference_time_and_memory_breakdowns_equal_the_json(tabs):
    tab, printed = tabs["infer"]
    bars = dict(tab.eval("[...document.querySelectorAll('#time-prefill .bar')].map(b => [b.dataset.key, "
                         "b.dataset.value])"))
    assert {k: float(v) for k, v in bars.items()} == {k: g["latency_s"]
                                                     for k, g in printed["prefill_latency_breakdown"].items()}
    steps = printed["num_tokens_to_generate"] - 1
    bars = dict(tab.eval("[...document.querySelectorAll('#time-decode .bar')].map(b => [b.dataset.key, "
                         "b.dataset.value])"))
    assert {k: float(v) for k, v in bars.items()} == pytest.approx(
        {k: g["latency_s"] for k, g in printed["decode_latency_breakdown"].items()}, rel=1e-12)
    mem = dict(tab.eval("[...document.querySelectorAll('#memory .mem')].map(m => [m.dataset.key, m.dataset.value])"))
    assert {k: float(v) for k, v in mem.items()} == {k: v for k, v in printed["memory_breakdown_per_gpu"].items()
                                                     if v > 0}


@pytest.mark.parametrize("name", ["train", "train-calibrated"])
def test_training_time_and_memory_breakdowns_equal_the_json(tabs, name):
    """The bars are the iteration's parts (latency_per_iter_<part>, not the totals, the time from FLOPs
    or the calibrated model's lower bound of the whole iteration): they add up to the iteration."""
    train, printed = tabs[name]
    bars = dict(train.eval("[...document.querySelectorAll('#time-iteration .bar')].map(b => [b.dataset.key, "
                           "b.dataset.value])"))
    not_parts = ("using_flops", "_total", "_hidden", "_lower_bound")
    expected = {k[len("latency_per_iter_"):]: v for k, v in printed.items() if k.startswith("latency_per_iter_")
                and isinstance(v, float) and v > 0 and not k.endswith(not_parts)}
    assert {k: float(v) for k, v in bars.items()} == expected
    assert math.isclose(sum(float(v) for v in bars.values()), printed["latency_per_iter"], rel_tol=1e-9)
    mem = dict(train.eval("[...document.querySelectorAll('#memory .mem')].map(m => [m.dataset.key, "
                          "m.dataset.value])"))
    assert float(mem["weights"]) == printed["weight_memory_per_gpu"]
    assert float(mem["activations"]) == printed["activation_memory_per_gpu"]


@pytest.mark.parametrize("name,x_key", [("plan-infer", "time_per_output_token"),
                                        ("plan-train", "total_training_latency")])
def test_the_pareto_front_is_the_json_front_with_each_point_labelled(tabs, name, x_key):
    tab, printed = tabs[name]
    points = tab.eval("[...document.querySelectorAll('.front-point')].map(p => [p.dataset.x, p.dataset.y, "
                      "p.dataset.label])")
    labels = tab.eval("[...document.querySelectorAll('.front-label')].map(t => [t.textContent, "
                      "t.getBoundingClientRect().width])")
    front = sorted(printed["pareto_front"], key=lambda p: p[x_key])
    assert len(points) == len(front) == len(labels) and front
    for (x, y, label), (text, width), p in zip(points, labels, front):
        assert float(x) == p[x_key] and float(y) == p["tokens_per_sec_per_gpu"]
        assert text == label and width > 20
        for key in ("tp", "pp"):
            assert f"{key} {p[key]}" in label
        batch = ("batch", p["batch_size_per_gpu"]) if "batch_size_per_gpu" in p else ("micro-batch", p["micro_batch"])
        assert f"{batch[0]} {batch[1]}" in label
    tab.hover(".front-point")
    assert "tokens_per_sec_per_gpu" in tab.eval("document.getElementById('tooltip').innerText")


@pytest.mark.parametrize("name,column,figure", [("plan-infer", "tok/s/gpu", "tokens_per_sec_per_gpu"),
                                                ("plan-train", "days", "total_training_latency")])
def test_the_plans_table_holds_every_row_and_sorts(tabs, name, column, figure):
    tab, printed = tabs[name]
    shown = [float(t) for _, t in _column(tab, "#plans", column)]
    assert len(shown) == len(printed["rows"])
    scale = 1 / 86400 if figure == "total_training_latency" else 1
    for t, row in zip(shown, printed["rows"]):
        assert abs(t - row["figures"][figure] * scale) <= 0.05 + 1e-9 * t
    _click_header(tab, "#plans", column)
    after = [float(t) for _, t in _column(tab, "#plans", column)]
    assert after == sorted(shown, reverse=True)
    # the best plan is shown in detail, with its own operator table
    assert tab.eval("document.querySelectorAll('#operators-0 tbody tr').length") > 5


def test_the_serve_page_shows_the_answer_figures_and_percentiles_of_the_json(tabs):
    tab, printed = tabs["serve"]
    # the first row of cards is the answer's (the engine step's own, from infer, come later)
    cards = tab.eval("[...document.querySelector('.cards').querySelectorAll('.card')].map(c => [c.dataset.key, c.dataset.value, "
                     "c.querySelector('.value').innerText])")
    assert {k for k, _, _ in cards} >= {"ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "requests_per_s",
                                        "num_gpus"}
    for key, raw, shown in cards:
        assert float(raw) == printed[key], key
        _assert_shows(shown, printed[key])
    rows = tab.eval("[...document.querySelectorAll('#latency tbody tr')].map(r => [...r.cells].map(c => "
                    "[c.innerText, c.dataset.value]))")
    assert [r[0][0] for r in rows] == ["time to first token", "time per output token", "end-to-end latency"]
    for row, name in zip(rows, ("ttft", "tpot", "e2e")):
        for (shown, raw), key in zip(row[1:], (f"{name}_s", f"{name}_p50_s", f"{name}_p90_s", f"{name}_p99_s")):
            assert float(raw) == printed[key], key
            _assert_shows(shown, printed[key])
    tab.click("#serve-values > summary")
    values = dict(tab.eval("[...document.querySelectorAll('#serve-values-table tbody tr')].map(r => "
                           "[r.cells[0].innerText, r.cells[1].dataset.value === undefined ? r.cells[2].innerText "
                           ": r.cells[1].dataset.value])"))
    numbers = {k: v for k, v in printed.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert numbers and all(float(values[k]) == v for k, v in numbers.items())
    # one engine step in detail: its operator tables and roofline are there
    assert tab.eval("document.querySelectorAll('#section-step, #section-roofline, #section-operators').length") == 3
