"""The style sheet and the script of the HTML report, inlined into every page so
that it opens offline: nothing is fetched when the page is viewed.

The script does three things and no more: it sorts a `table.sortable` by the
column whose header is clicked (or activated with Enter / Space), ordering by a
cell's `data-value` (the raw number) where it has one; it shows the `data-tip`
text of the mark under the pointer (or with keyboard focus) in one tooltip; and
it turns the embedded JSON summary into a download link."""

STYLE = """
:root { --ink: #212529; --dim: #6c757d; --line: #dee2e6; --panel: #f8f9fa; --accent: #1c7ed6;
        --compute: #2b8a3e; --memory: #e8590c; --communication: #7048e8; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: var(--ink);
       margin: 0 auto; max-width: 1280px; padding: 0 24px 48px; }
h1 { font-size: 22px; margin: 24px 0 4px; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 15px; margin: 20px 0 6px; }
p.note, .dim { color: var(--dim); }
.banner { background: var(--panel); border-left: 4px solid var(--accent); padding: 8px 12px; margin: 12px 0; }
.banner.roofline { border-left-color: var(--memory); }
dl.setup { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.setup dt { font-weight: 600; }
dl.setup dd { margin: 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 10px; margin: 12px 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
.card .label { color: var(--dim); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card .value { font-size: 20px; font-weight: 600; }
.card .detail { color: var(--dim); font-size: 12px; }
table { border-collapse: collapse; margin: 6px 0 14px; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 4px 0; caption-side: top; }
caption .dim { font-weight: normal; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { text-align: left; background: var(--panel); position: sticky; top: 0; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.shapes { white-space: nowrap; color: var(--dim); font-size: 12px; }
table.sortable td, table.sortable th { white-space: nowrap; }
table.sortable td.prose { white-space: normal; min-width: 26em; }
tfoot td { font-weight: 600; border-top: 2px solid var(--ink); }
tbody tr:hover { background: #e7f5ff; }
table.sortable thead th { cursor: pointer; user-select: none; }
table.sortable thead th::after { content: " \\2195"; color: #adb5bd; }
table.sortable thead th[aria-sort="ascending"]::after { content: " \\25B2"; color: var(--ink); }
table.sortable thead th[aria-sort="descending"]::after { content: " \\25BC"; color: var(--ink); }
.bound-compute { color: var(--compute); font-weight: 600; }
.bound-memory { color: var(--memory); font-weight: 600; }
.bound-communication { color: var(--communication); font-weight: 600; }
.table-scroll { overflow-x: auto; }
figure { margin: 8px 0 18px; }
figcaption { color: var(--dim); font-size: 12px; margin-top: 4px; }
svg.chart { display: block; max-width: 100%; height: auto; font: 12px system-ui, sans-serif; }
svg.chart text { fill: var(--ink); }
svg.chart .axis line, svg.chart .axis path { stroke: #868e96; }
svg.chart .grid line { stroke: #e9ecef; }
svg.chart [data-tip] { cursor: pointer; }
svg.chart [data-tip]:hover, svg.chart .hovered { stroke: #000; stroke-width: 2.5; }
svg.chart [data-tip]:focus { outline: none; stroke: var(--accent); stroke-width: 3; }
ul.legend { list-style: none; padding: 0; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 4px 16px; }
ul.legend li { display: flex; align-items: center; gap: 6px; }
ul.legend svg { flex: none; }
ul.warnings li, ul.notes li { margin: 2px 0; }
#tooltip { position: absolute; z-index: 10; max-width: 460px; padding: 6px 9px; background: #212529; color: #fff;
           border-radius: 4px; font-size: 12px; white-space: pre-line; pointer-events: none;
           box-shadow: 0 2px 8px rgba(0, 0, 0, .3); }
#tooltip[hidden] { display: none; }
details > summary { cursor: pointer; font-weight: 600; margin: 8px 0; }
pre { background: var(--panel); padding: 8px; overflow-x: auto; }
@media print { #tooltip { display: none; } th { position: static; } }
"""

SCRIPT = """
(function () {
  "use strict";
  var NUMBER = /^[-+]?\\d[\\d,]*(\\.\\d+)?(e[-+]?\\d+)?$/i;

  // ------------------------------------------------ sorting by a column
  function cellKey(cell) {
    var raw = cell.getAttribute("data-value");
    if (raw !== null && raw !== "" && !isNaN(Number(raw))) return Number(raw);
    var text = cell.textContent.trim();
    return NUMBER.test(text) ? Number(text.replace(/,/g, "")) : text.toLowerCase();
  }
  function compare(a, b, descending) {
    var aNum = typeof a === "number", bNum = typeof b === "number";
    if (aNum !== bNum) return aNum ? -1 : 1;  // numbers first, "-" and text after, either way
    var c = aNum ? a - b : (a < b ? -1 : a > b ? 1 : 0);
    return descending ? -c : c;
  }
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
    var rows = Array.prototype.slice.call(body.rows);
    var keys = rows.map(function (row) { return cellKey(row.cells[col]); });
    var numeric = keys.some(function (k) { return typeof k === "number"; });
    var now = th.getAttribute("aria-sort");
    // first click: numbers largest first, text A to Z; every further click reverses
    var descending = now ? now === "ascending" : numeric;
    var order = rows.map(function (row, i) { return i; });
    order.sort(function (i, j) { return compare(keys[i], keys[j], descending) || i - j; });
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    order.forEach(function (i) { body.appendChild(rows[i]); });
  }
  document.addEventListener("click", function (e) {
    var th = e.target.closest && e.target.closest("table.sortable thead th");
    if (th) sortBy(th);
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") hide();
    if ((e.key === "Enter" || e.key === " ") && e.target.matches && e.target.matches("table.sortable thead th")) {
      e.preventDefault();
      sortBy(e.target);
    }
  });

  // ------------------------------------------------ tooltips
  var tip = document.getElementById("tooltip"), active = null;
  function place(x, y) {
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var right = window.scrollX + document.documentElement.clientWidth - 8;
    var bottom = window.scrollY + window.innerHeight - 8;
    tip.style.left = Math.max(window.scrollX + 4, Math.min(x + 14, right - w)) + "px";
    tip.style.top = (y + 18 + h > bottom ? Math.max(window.scrollY + 4, y - h - 10) : y + 18) + "px";
  }
  function show(el, x, y) {
    if (active && active !== el) active.classList.remove("hovered");
    active = el;
    el.classList.add("hovered");
    tip.textContent = el.getAttribute("data-tip");
    tip.hidden = false;
    place(x, y);
  }
  function hide() {
    if (active) active.classList.remove("hovered");
    active = null;
    tip.hidden = true;
  }
  document.addEventListener("mouseover", function (e) {
    var el = e.target.closest && e.target.closest("[data-tip]");
    if (el) show(el, e.pageX, e.pageY); else if (active) hide();
  });
  document.addEventListener("mousemove", function (e) { if (active && !tip.hidden) place(e.pageX, e.pageY); });
  document.addEventListener("focusin", function (e) {
    var el = e.target.closest && e.target.closest("[data-tip]");
    if (!el) return;
    var r = el.getBoundingClientRect();
    show(el, r.right + window.scrollX, r.top + window.scrollY);
  });
  document.addEventListener("focusout", hide);

  // ------------------------------------------------ the summary as a file
  var link = document.getElementById("json-download"), data = document.getElementById("summary-json");
  if (link && data && window.Blob && window.URL) {
    link.href = URL.createObjectURL(new Blob([data.textContent], {type: "application/json"}));
  }
})();
"""
