"""The index page of the reports directory: every report and trend page.

    /usr/bin/python3 -m reports.lab.index [REPORTS_DIR]

Writes REPORTS_DIR/index.html (default: the clone's reports/generated/,
where bench/run-bench.sh writes the reports): one row per
report directory (one holding results.json and index.html), newest first,
with its workload, date, accel, reps, kernel series and the main verdicts;
then the history pages (history-<workload>/index.html). Called by
bench/run-bench.sh after each report and by `make bench-history`.
"""

import html
import json
import os
import sys

from reports.lab.analysis import Verdict
from reports.lab.runmodel import LAB_TOP, injected_delay_ns


def reports(root):
    """[(name, results dict)] of the report directories under root."""
    out = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        res = os.path.join(d, "results.json")
        if not (os.path.isfile(res) and
                os.path.isfile(os.path.join(d, "index.html"))):
            continue
        try:
            with open(res, encoding="utf-8") as f:
                out.append((name, json.load(f)))
        except (OSError, ValueError) as e:
            out.append((name, {"error": str(e)}))
    out.sort(key=lambda x: (x[1].get("meta") or {}).get("date") or "",
             reverse=True)
    return out


def verdict_summary(res):
    """"seqread throughput: met; ..." from a report's verdicts (the
    results.json of any report: analysis.Verdict.from_json)."""
    verdicts = [Verdict.from_json(v) for v in res.get("verdicts") or []]
    return "; ".join(f"{v.phase} {v.metric}: {v.status}"
                     for v in verdicts if not v.note) or "-"


def write_index(root):
    esc = html.escape
    rows = []
    for name, res in reports(root):
        meta = res.get("meta") or {}
        info = meta.get("run_info") or {}
        if "error" in res:
            rows.append(f'<tr><td><a href="{esc(name)}/index.html">'
                        f"{esc(name)}</a></td><td colspan=\"6\">unreadable "
                        f"results.json: {esc(res['error'])}</td></tr>")
            continue
        delay = injected_delay_ns(meta)
        rows.append(
            f'<tr><td><a href="{esc(name)}/index.html">{esc(name)}</a> '
            f'(<a href="{esc(name)}/summary.md">md</a>)</td>'
            f"<td>{esc(str(meta.get('workload', '?')))}</td>"
            f"<td>{esc(str(meta.get('date', '?')))}</td>"
            f"<td>{esc(str(info.get('accel', '?')))}</td>"
            f"<td>{esc(str(meta.get('reps', '?')))}</td>"
            f"<td><code>{esc(str(info.get('kernel_series_hash', '?')))}"
            "</code></td>"
            f"<td>{esc(verdict_summary(res))}"
            + (f" <b>(injected slowdown {delay} ns: not a measurement)</b>"
               if delay else "") + "</td></tr>")
    hist = sorted(n for n in os.listdir(root) if n.startswith("history-")
                  and os.path.isfile(os.path.join(root, n, "index.html")))
    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Benchmark reports</title><style>"
        "body{font-family:sans-serif;max-width:1150px;margin:1em auto;"
        "padding:0 1em}table{border-collapse:collapse;font-size:.9em}"
        "td,th{border:1px solid #bbb;padding:2px 6px;text-align:left}"
        "</style></head><body>",
        "<h1>Benchmark reports</h1>",
        "<h2>Trends</h2>",
        "<ul>" + "".join(f'<li><a href="{esc(n)}/index.html">{esc(n[8:])}'
                         "</a></li>" for n in hist) + "</ul>"
        if hist else "<p>No history page yet (<code>make bench-history "
                     "WORKLOAD=...</code>).</p>",
        f"<h2>Reports ({len(rows)})</h2>",
        "<table><tr><th>report</th><th>workload</th><th>date</th>"
        "<th>accel</th><th>reps</th><th>series</th><th>verdicts</th></tr>"
        + "".join(rows) + "</table>" if rows else
        "<p>No reports yet (<code>make bench WORKLOAD=...</code>).</p>",
        "</body></html>",
    ]
    path = os.path.join(root, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(page) + "\n")
    return path, len(rows), len(hist)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    root = (argv[0] if argv
            else os.path.join(LAB_TOP, "reports", "generated"))
    if not argv:
        os.makedirs(root, exist_ok=True)
    if not os.path.isdir(root):
        print(f"index: error: no directory {root}", file=sys.stderr)
        return 2
    path, n, h = write_index(root)
    print(f"index: {n} report(s), {h} trend page(s): {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
