"""Text from records lands in markdown as text: no raw HTML, no emphasis, code, headings, lists or
table columns made by a machine label (issue 17 item 10).

Checked by rendering with markdown-it (CommonMark with GitHub's tables and strikethrough; rich
installs it): what the reader sees is the label, character for character.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from cnnbench.cli import main
from cnnbench.report import ReportOptions, build_report
from cnnbench.report.render.markdown import render_markdown
from cnnbench.words import escape_markdown
from tests.report_fixtures import record

EVIL = "a|b<script>x</script> *s* _u_ # h `c` [l](u) ~~d~~ &amp; \\ $m$\nnext _line_"
SHOWN = EVIL.replace("\n", " ")
"""What a reader must see: the label, its line break as a space."""

NASTY = [
    EVIL, "- starts a list", "+ also", "* and this", "1. numbered", "12) numbered too", "> quoted", "# heading",
    "### deeper ###", "=== under", "    four spaces", "<b>bold</b>", "<!-- comment -->", "<http://x.org>",
    "&lt;entity&gt; &#65; &copy", "a & b < c > d", "__strong__ **strong**", "_i_ *i*", "snake_case_name",
    "trailing_", "_leading", "x*y*z", "`code` ``two``", "~strike~ ~~strike~~", "[link](http://x)", "![img](y.png)",
    "[ref]: http://x", "back\\slash\\", "pipe|in|cell", "a\r\nb\rc\u2028d", "tab\there", "$x^2$", "é_ü_ñ",
    "<script>alert(1)</script>", "</td><td>", "\\|", "| - |",
]


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _shown(text: str) -> str:
    """How markdown-it writes ``text`` as HTML text (line breaks collapsed, ends stripped)."""
    return html.escape(" ".join(text.splitlines()).strip(), quote=False).replace('"', "&quot;")


@pytest.mark.parametrize("text", NASTY)
def test_escaped_text_shows_as_itself_wherever_it_lands(text):
    md = _md()
    shown = _shown(text)
    assert md.render(escape_markdown(text, line_start=True)) == f"<p>{shown}</p>\n"
    assert md.render("- " + escape_markdown(text, line_start=True)) == f"<ul>\n<li>{shown}</li>\n</ul>\n"
    assert md.render("## " + escape_markdown(text, line_start=True)) == f"<h2>{shown}</h2>\n"
    assert md.render("_" + escape_markdown(text) + "_") == f"<p><em>{shown}</em></p>\n"
    table = f"| {escape_markdown(text)} | b |\n|:--|--:|\n| {escape_markdown(text)} | 1 |\n"
    rendered = md.render(table)
    assert f"<th style=\"text-align:left\">{shown}</th>" in rendered
    assert f"<td style=\"text-align:left\">{shown}</td>" in rendered
    assert rendered.count("<td") == 2  # the cell stayed one cell


def test_words_and_numbers_stay_readable_in_the_markdown_itself():
    for plain in ("resnet50", "amp_fp16", "mobilenet_v2", "12,596 ±2.0%", "p < 0.05", "ratio > 1", "a & b",
                  "1.90× · 95.0%", "syn-replicated-4gpus", "(no samples)"):
        assert escape_markdown(plain) == plain


def _inline_text(tok: Token) -> str:
    return "".join(c.content if c.type in ("text", "code_inline") else " " if c.type == "softbreak" else ""
                   for c in tok.children or [])


def _texts_by_place(markdown: str) -> dict[str, list[str]]:
    """The text a reader sees, by where it is: heading, bullet, paragraph, th, td, note, link."""
    tokens = _md().parse(markdown)
    places: dict[str, list[str]] = {}
    stack: list[str] = []
    for tok in tokens:
        if tok.nesting == 1:
            stack.append(tok.tag)
        elif tok.nesting == -1:
            stack.pop()
        elif tok.type == "inline":
            kinds = [c.type for c in tok.children or []]
            if "li" in stack:
                place = "bullet"
            elif stack[-1] in ("th", "td"):
                place = stack[-1]
            elif stack[-1].startswith("h"):
                place = "heading"
            elif kinds[:1] == ["em_open"]:
                place = "note"
            else:
                place = "paragraph"
            places.setdefault(place, []).append(_inline_text(tok))
            if "link_open" in kinds:
                places.setdefault("link", []).append(_inline_text(tok))
    return places


def _evil_records() -> list[dict]:
    same = {"cpu_model": "CPU-X", "gpu_model": "GPU-P100"}  # the machines differ in name only
    recs = []
    for machine, scale in ((EVIL, 1.0), ("m-slow", 0.5)):
        for n in (1, 2):
            for ips in (100.0, 101.0):
                warned = {"warnings": [f"busy CPU: {EVIL}"]} if machine == EVIL else None
                recs.append(record("resnet50", machine, ips * n * 0.95 * scale, num_devices=n, environment=same,
                                   metrics=warned))
    return recs


def _all_tokens(tokens: list[Token]) -> list[Token]:
    out = []
    for t in tokens:
        out.append(t)
        out += _all_tokens(t.children or [])
    return out


@pytest.mark.parametrize("include_warned", [False, True])
def test_a_machine_label_is_escaped_everywhere_in_summary_md(include_warned):
    opts = ReportOptions(effects=["machine"], include_warned=include_warned, max_plots=0,
                         problems=[EVIL, f"- {EVIL}", f"x.jsonl:3: {EVIL}"])
    markdown = render_markdown(build_report(_evil_records(), opts))
    tokens = _all_tokens(_md().parse(markdown))
    assert not [t for t in tokens if t.type in ("html_inline", "html_block", "code_inline", "code_block", "s_open",
                                                "blockquote_open", "ordered_list_open")]
    assert all(t.attrs.get("href", "#").startswith("#") for t in tokens if t.type == "link_open")  # contents only
    assert "<script" not in _md().render(markdown)
    places = _texts_by_place(markdown)
    for place in ("heading", "bullet", "paragraph", "th", "td", "note", "link"):
        assert any(SHOWN in text for text in places.get(place, [])), place
    assert SHOWN in places["bullet"] and f"- {SHOWN}" in places["bullet"]  # one bullet each, not a nested list
    if include_warned:
        assert any(f"Fastest machine per model: {SHOWN}" in t for t in places["bullet"])  # an observation


def test_compare_markdown_escapes_record_text(tmp_path, capsys):
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        recs = [record(machine=m, ips=ips, metrics={"warnings": [f"busy CPU: {EVIL}"]})
                for m in (EVIL, "m-slow") for ips in (100.0, 101.0)]  # two machines: a machine column
        (tmp_path / side / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "md"]) == 0
    out = capsys.readouterr().out
    tokens = _all_tokens(_md().parse(out))
    assert not [t for t in tokens if t.type in ("html_inline", "html_block", "code_inline", "s_open")]
    places = _texts_by_place(out)
    assert SHOWN in places["td"]
    assert any("<script>" in n for n in places["note"])  # the warning's text, as text


def test_the_report_folder_writes_the_escaped_summary(tmp_path):
    from cnnbench.report import write_report

    written = write_report(build_report(_evil_records(), ReportOptions(max_plots=0)), tmp_path / "out")
    text = Path(written.summary).read_text(encoding="utf-8")
    assert "<script>" not in text and "&lt;script>x&lt;/script>" in text
    assert "a\\|b" in text and "\\*s\\*" in text and "\\_u\\_" in text and "\\`c\\`" in text and "\\# h" in text
