"""``cnnbench compare`` output: a terminal table (rich; plain text when piped), markdown, CSV, JSON.

Every format carries the same facts: per pair the baseline's and the candidate's images/sec
(medians of their runs), the ratio (candidate / baseline), its 95% interval, the p-value,
what the test used (repeats or steps, with the run counts) and the verdict; then a
geometric-mean line, what was matched and ignored, what found no partner, and the legend of
the marks. CSV and JSON keep full values; tables round them. ``cnnbench comm`` records compare
as bus bandwidth per collective and size (:mod:`cnnbench.compare.bandwidth`): a table of their
own (in CSV, the only rows when no run matched; in JSON, ``bandwidth``).
"""

from __future__ import annotations

import json
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.marks import Marks, marks_section
from cnnbench.analysis.points import Measure
from cnnbench.analysis.significance import NONE
from cnnbench.compare.bandwidth import bandwidth_csv, bandwidth_markdown, bandwidth_records, print_bandwidth
from cnnbench.compare.build import ComparedPair, CompareResult, summary_line, verdict_counts
from cnnbench.results.csv_out import csv_text
from cnnbench.words import escape_markdown, one_line, plural

FORMATS = ("table", "md", "csv", "json")
HEADER = (F.field(F.MODEL).label, F.field(F.BATCH).label, "configuration", F.field(F.MACHINE).label,
          "baseline img/s", "candidate img/s", "ratio", "95% interval", "p", "test", "result")


def _ips(m: Measure) -> str:
    med = m.median
    if med is None:
        return m.failure_text() or "—"
    return F.FIELDS[F.IPS].show(med) if med < 1e5 else f"{med:,.0f}"  # the registry's format; no decimals past 1e5


def _interval(pair: ComparedPair) -> str:
    c = pair.comparison
    if c.basis == NONE or c.ratio is None:
        return "—"
    if c.low is None or c.high is None:
        return "unbounded"
    return f"{c.low:.3f}–{c.high:.3f}"


def _p(pair: ComparedPair) -> str:
    p = pair.comparison.p
    if p is None:
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _test(pair: ComparedPair) -> str:
    c = pair.comparison
    if c.ratio is None:
        return "—"
    runs = f"{c.n_base:,} vs {plural(c.n_cand, 'run')}"
    return f"{c.basis}, {runs}" if c.basis != NONE else runs


def _result(pair: ComparedPair) -> str:
    symbols = pair.marks.symbols
    return pair.comparison.verdict + (f" {symbols}" if symbols else "")


def _show_machine(result: CompareResult) -> bool:
    return result.across_machines or len({p.machine for p in result.pairs}) > 1


def rows(result: CompareResult) -> tuple[list[str], list[list[str]]]:
    """The header and the display rows (the machine column only where it says something)."""
    machine = _show_machine(result)
    header = [h for h in HEADER if machine or h != F.field(F.MACHINE).label]
    out = []
    for p in result.pairs:
        ratio = "—" if p.comparison.ratio is None else f"{p.comparison.ratio:.3f}"
        row = [p.model, p.batch, p.configuration] + ([p.machine] if machine else [])
        row += [_ips(p.base), _ips(p.cand), ratio, _interval(p), _p(p), _test(p), _result(p)]
        out.append(row)
    return header, out


def _results(n: int) -> str:
    return f"{n} result" if n == 1 else f"{n} results"


def notes(result: CompareResult) -> list[str]:
    """The lines under the table: summary, matching, unmatched, legend."""
    lines = [summary_line(result)]
    matched = "every configuration field that changes what is measured"
    if not result.across_machines:
        matched += ", the machine"
    lines.append(f"Baseline: {result.baseline.label} ({_results(len(result.baseline.records))}); candidate: "
                 f"{result.candidate.label} ({_results(len(result.candidate.records))}). Matched on {matched} "
                 f"and the source" + (f"; ignored: {', '.join(map(F.short_name, result.ignored))}" if result.ignored
                                      else "") + ".")
    if result.unmatched_base or result.unmatched_cand:
        text = (f"No partner for {plural(result.unmatched_base, 'baseline configuration')} and "
                f"{plural(result.unmatched_cand, 'candidate configuration')}")
        if result.why_unmatched:
            why = ", ".join(f"{F.short_name(f)} ({n})" for f, n in list(result.why_unmatched.items())[:5])
            text += f"; they differ from their nearest partner in: {why} (see --ignore, --across-machines)"
        lines.append(text + ".")
    lines.append(f"ratio = candidate / baseline images/sec (medians over runs; > 1: the candidate is faster). "
                 f"Significant: a t-test, p < {result.alpha:g}, on the runs' images/sec when both sides "
                 f"have two or more runs (test 'repeats': logarithms, the run-to-run spread pooled per machine "
                 f"over all pairs), else on block means of the step times (test 'steps'; "
                 f"one run per side shows nothing of what changes between runs), and a ratio at least "
                 f"{result.noise * 100:g}% from 1. 'no samples': one run per side and no step times, never "
                 f"significant.")
    marks = Marks()
    for p in result.pairs:
        marks.add(p.marks)
    lines += marks_section(marks, observations=False)
    return lines


def render_markdown(result: CompareResult) -> str:
    header, body = rows(result)
    right = {"baseline img/s", "candidate img/s", "ratio", "95% interval", "p"}
    out = ["| " + " | ".join(escape_markdown(h) for h in header) + " |",
           "|" + "|".join("--:" if h in right else ":--" for h in header) + "|"]
    out += ["| " + " | ".join(escape_markdown(c) for c in r) + " |" for r in body]
    return "\n".join(out + [""] + [f"_{escape_markdown(n)}_" for n in notes(result)]) + "\n"


def _pair_record(p: ComparedPair) -> dict[str, Any]:
    c = p.comparison
    return {
        "model": p.model, "batch_size": p.batch, "configuration": p.configuration, "machine": p.machine,
        "fields": {F.short_name(k) if k in F.SHORT_NAMES else k: v for k, v in p.values.items()},
        "baseline_images_per_sec": p.base.median, "candidate_images_per_sec": p.cand.median,
        "baseline_runs": c.n_base, "candidate_runs": c.n_cand,
        "baseline_failures": p.base.failure_text() or None, "candidate_failures": p.cand.failure_text() or None,
        "ratio": c.ratio, "ci_low": c.low, "ci_high": c.high, "p_value": c.p, "test": c.basis,
        "significant": c.significant, "verdict": c.verdict,
        "wide_spread_runs": p.marks.wide, "warned_runs": p.marks.warned, "warnings": p.warnings,
    }


def render_json(result: CompareResult) -> str:
    doc = {
        "baseline": {"label": result.baseline.label, "results": len(result.baseline.records)},
        "candidate": {"label": result.candidate.label, "results": len(result.candidate.records)},
        "split_by": result.split,
        "matched_on": list(result.matched_on),
        "ignored": list(result.ignored),
        "across_machines": result.across_machines,
        "alpha": result.alpha, "min_effect": result.noise,
        "pairs": [_pair_record(p) for p in result.pairs],
        "summary": {"pairs": len(result.pairs), "geomean_ratio": result.geomean, **{
            k.replace(" ", "_"): v for k, v in verdict_counts(result).items()}},
        "unmatched": {"baseline": result.unmatched_base, "candidate": result.unmatched_cand,
                      "differing_fields": result.why_unmatched},
        "bandwidth": bandwidth_records(result.bandwidth),
    }
    return json.dumps(doc, indent=2, allow_nan=False, default=str) + "\n"


def render_csv(result: CompareResult) -> str:
    records = [_pair_record(p) for p in result.pairs]
    columns = [k for k in (records[0] if records else _pair_record_keys()) if k != "fields"]
    return csv_text(columns, (["" if r[k] is None else "; ".join(r[k]) if isinstance(r[k], list) else r[k]
                               for k in columns] for r in records))


def _pair_record_keys() -> list[str]:
    return ["model", "batch_size", "configuration", "machine", "baseline_images_per_sec",
            "candidate_images_per_sec", "ratio", "ci_low", "ci_high", "p_value", "test", "significant", "verdict"]


_STYLES = {"faster": "green", "slower": "red", "not significant": "dim", "no samples": "yellow"}


def print_rich(result: CompareResult) -> None:
    """The table through :func:`cnnbench.terminal.print_table`: on a terminal with colours (green
    faster, red slower, dim not significant), piped the plain table (``COLUMNS`` wide when set)."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from cnnbench.terminal import print_table

    if result.bandwidth:
        print_bandwidth(result.bandwidth)
        if not result.pairs:
            return
    header, body = rows(result)
    # a label's text (someone else's record) never writes to the terminal, nor is read as rich's markup
    table = Table(*header, caption=escape("\n".join(map(one_line, notes(result)))), caption_justify="left")
    for col in table.columns:
        if str(col.header) in ("baseline img/s", "candidate img/s", "ratio", "95% interval", "p"):
            col.justify = "right"
    for r, p in zip(body, result.pairs, strict=False):  # a label's text as it is: never markup, nor escapes
        style = _STYLES.get(p.comparison.verdict, "")
        table.add_row(*(Text(one_line(c)) for c in r[:-1]), Text(one_line(r[-1]), style=style))
    print_table(table)


def render(result: CompareResult, fmt: str) -> str:
    """The text of ``fmt`` (``md``, ``csv`` or ``json``; the table prints with :func:`print_rich`)."""
    if fmt == "json":
        return render_json(result)
    if fmt == "csv":
        return render_csv(result) if result.pairs or not result.bandwidth else bandwidth_csv(result.bandwidth)
    if fmt == "md":
        runs = render_markdown(result) if result.pairs or not result.bandwidth else ""
        return runs + ("\n" if runs and result.bandwidth else "") + (
            bandwidth_markdown(result.bandwidth) if result.bandwidth else "")
    raise ValueError(f"no text format {fmt!r} (md, csv, json)")

