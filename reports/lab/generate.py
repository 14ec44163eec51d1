"""Build a benchmark report from a raw run directory.

    /usr/bin/python3 -m reports.lab.generate RUN_DIR OUT_DIR [--threshold PCT]

Reads the run through reports.lab.runmodel; writes to OUT_DIR: index.html,
summary.md, results.json, verdicts.xml (the verdicts as JUnit: met
passes, not met fails, undecided or not conclusive is skipped, so a CI
dashboard shows the benchmark beside make test), PNG plots, and copies
of raw/, profiles/, console.log and the run's .json and .tsv files, so
every number in the report traces back to a raw file. The pieces: reports.lab.analysis (numbers), reports.lab.plots
(PNG and SVG), reports.lab.render (Markdown and HTML); reports/README.md
describes the formats and the rules.

Exit status: 0 report written (data problems, if any, are listed in it and
on stderr), 2 usage error or unusable run directory.
"""

import argparse
import json
import math
import os
import re
import shutil
import sys

from reports.lab.runmodel import RunError, load_run
from reports.lab.analysis import DEFAULT_THRESHOLD, MET, NOT_MET, analyze
from reports.lab.plots import make_plots
from reports.lab.render import build_doc


def jsonable(x):
    """NaN -> None, tuples -> lists, keys -> str, typed records (those
    with to_json: analysis.PhaseComparison, Verdict) -> their JSON,
    recursively."""
    if hasattr(x, "to_json"):
        return jsonable(x.to_json())
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def copy_sources(run_dir, out_dir):
    """Copy raw/, profiles/, console.log and every .json and .tsv file of
    the run directory's top (meta.json, cpu.tsv, cpu-windows.tsv, and a
    workload's own files such as an old scaling run's scaling.json)
    here."""
    if os.path.realpath(run_dir) == os.path.realpath(out_dir):
        return
    for name in ("raw", "profiles"):
        src, dst = os.path.join(run_dir, name), os.path.join(out_dir, name)
        if os.path.isdir(src):
            if os.path.islink(dst) or os.path.isfile(dst):
                os.remove(dst)
            elif os.path.isdir(dst):
                shutil.rmtree(dst)
            shutil.copytree(src, dst)
    for name in sorted(os.listdir(run_dir)):
        src = os.path.join(run_dir, name)
        if os.path.isfile(src) and (name == "console.log" or
                                    name.endswith((".json", ".tsv"))):
            shutil.copyfile(src, os.path.join(out_dir, name))


def remove_old_outputs(out_dir):
    """Remove the plots and flame graphs an earlier report left in out_dir
    (reports/generated/<date>-<workload> is reused by a second run on the same day,
    whose report might not draw them all)."""
    for name in os.listdir(out_dir):
        path = os.path.join(out_dir, name)
        if os.path.isfile(path) and (name.endswith(".png") or
                                     re.fullmatch(r"flame-.*\.svg", name)):
            os.remove(path)
    if os.path.isdir(os.path.join(out_dir, "flame")):
        shutil.rmtree(os.path.join(out_dir, "flame"))


def generate(run_dir, out_dir, threshold=DEFAULT_THRESHOLD):
    """Write the whole report; return the results dict."""
    run = load_run(run_dir)
    os.makedirs(out_dir, exist_ok=True)
    remove_old_outputs(out_dir)
    res = analyze(run, threshold)
    plots = make_plots(run, res, out_dir)
    res["plots"] = plots
    doc = build_doc(run, res, threshold, plots)
    title = f"Benchmark report: {run.workload} {run.date or ''}"
    with open(os.path.join(out_dir, "summary.md"), "w",
              encoding="utf-8") as f:
        f.write(doc.to_md())
    with open(os.path.join(out_dir, "index.html"), "w",
              encoding="utf-8") as f:
        f.write(doc.to_html(title))
    with open(os.path.join(out_dir, "results.json"), "w",
              encoding="utf-8") as f:
        json.dump(jsonable(res), f, indent=1, sort_keys=False,
                  ensure_ascii=False)
        f.write("\n")
    write_junit(os.path.join(out_dir, "verdicts.xml"),
                f"bench.{run.workload}", res["verdicts"])
    copy_sources(run_dir, out_dir)
    return res


def write_junit(path, suite, verdicts):
    """The verdicts (analysis.Verdict) as JUnit XML, one testcase each:
    "met" passes, "not met" fails, anything else (undecided, not
    conclusive, not measured, not judged) is skipped with its text."""
    from xml.sax.saxutils import escape, quoteattr
    cases, fails, skips = [], 0, 0
    for i, v in enumerate(verdicts):
        name = f"note {i}" if v.note else f"{v.phase} {v.metric}"
        body = ""
        if v.status == NOT_MET:
            fails += 1
            body = f"<failure message={quoteattr(v.text)}/>"
        elif v.status != MET:
            skips += 1
            body = f"<skipped message={quoteattr(f'{v.status}: {v.text}')}/>"
        cases.append(f"  <testcase classname={quoteattr(suite)} "
                     f"name={quoteattr(name)}>{body}"
                     f"<system-out>{escape(v.text)}</system-out></testcase>")
    with open(path, "w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                f"<testsuite name={quoteattr(suite)} tests=\"{len(cases)}\" "
                f"failures=\"{fails}\" errors=\"0\" skipped=\"{skips}\">\n"
                + "\n".join(cases) + "\n</testsuite>\n")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Build a benchmark report (index.html, summary.md, "
                    "results.json, PNG plots) from a raw run directory.")
    ap.add_argument("run_dir", metavar="RUN_DIR")
    ap.add_argument("out_dir", metavar="OUT_DIR")
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                    metavar="PCT",
                    help="minimum |change %%| to mark a difference "
                         "significant (default %(default)g)")
    args = ap.parse_args(argv)
    try:
        res = generate(args.run_dir, args.out_dir, args.threshold)
    except RunError as e:
        print(f"generate: error: {e}", file=sys.stderr)
        return 2
    for w in res["warnings"]:
        print(f"generate: warning: {w}", file=sys.stderr)
    for v in res["verdicts"]:
        print("verdict: " + v.text.replace("**", ""))
    print(f"generate: report in {args.out_dir}/index.html and "
          f"{args.out_dir}/summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
