"""Tables in the terminal: as wide as COLUMNS; plain text (no colour, no box lines) when piped."""

from __future__ import annotations

import io
import re

import pytest

from cnnbench import terminal
from cnnbench.cli import main
from cnnbench.results.record import Record
from cnnbench.results.store import append_record

BOX = re.compile(r"[\u2500-\u257f]")  # box-drawing characters
ANSI = re.compile(r"\x1b\[")


@pytest.fixture
def store(tmp_path):
    for i, model in enumerate(["resnet18", "resnet101"]):
        append_record(tmp_path, Record(config={"model": model, "batch_size": 8, "precision": "fp32"},
                                       environment={"machine": "a-rather-long-machine-label-" + "x" * 30},
                                       metrics={"total_images_per_sec": 100.0 + i}).to_dict())
    return tmp_path


COMMANDS = {"results list": ["results", "list", "{store}"], "models": ["models", "resnet18"]}


@pytest.mark.parametrize("command", COMMANDS)
def test_piped_tables_are_plain_and_not_wrapped(store, capsys, monkeypatch, command):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main([a.format(store=store) for a in COMMANDS[command]]) == 0
    out = capsys.readouterr().out
    assert not BOX.search(out) and not ANSI.search(out)
    header = out.splitlines()[0]
    assert len(header.split()) > 5  # one header line: nothing wrapped


@pytest.mark.parametrize("command", COMMANDS)
def test_piped_tables_fit_columns(store, capsys, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "70")
    assert main([a.format(store=store) for a in COMMANDS[command]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= 70


def test_terminal_tables_fit_columns_with_their_lines(store, capsys, monkeypatch):
    monkeypatch.setattr(terminal, "is_terminal", lambda stream: True)
    monkeypatch.setenv("COLUMNS", "70")
    assert main(["results", "list", str(store)]) == 0
    out = ANSI.sub("", re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out))
    assert BOX.search(out)
    assert max(len(line) for line in out.splitlines()) <= 70


def _random_table(seed: int, rows: int):
    import random

    from rich.markup import escape
    from rich.table import Table

    rng = random.Random(seed)
    words = ["a", "", "—", "é中", "résumé", "abc def", "[x]", "1234.56", "中文字", "x" * 30, "\\[y]",
             " lead", "trail ", "nb\u00a0sp", "\u00a0x", "zw\u200bs", "e\u0301", "\u202eltr", "pua\ue000"]
    table = Table(show_lines=False, header_style="bold")
    width = rng.randint(1, 6)
    for _ in range(width):
        header = rng.choice(["started", "b", "中", "status", ""])
        table.add_column(header, justify=rng.choice(["left", "right", "center"]))
    for _ in range(rows):
        table.add_row(*[rng.choice([escape(rng.choice(words)), "[green]ok[/]", "[red]error[/]"]) for _ in range(width)])
    return table


def test_a_table_of_many_rows_is_printed_as_rich_prints_it_plain():
    """Past MANY_ROWS a table is aligned by cnnbench, not laid out cell by cell by rich (results list
    --limit 0 of 100,000 runs: 100 s): the same text as rich's plain table, cell for cell, or rich's
    own where cnnbench would not know it (a column of nothing)."""
    import io

    compared = 0
    for seed in range(300):
        table = _random_table(seed, rows=seed % 7 * 3)  # rich's own layout is what is compared: few rows
        rich_out = io.StringIO()
        terminal.print_table(table, terminal.console_for(rich_out))
        text = terminal.plain_text(table, terminal.UNLIMITED)
        assert text is None or text == rich_out.getvalue(), seed
        compared += text is not None
    assert compared > 200


def test_results_list_of_many_runs_is_the_same_text_aligned_here(store, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    for i in range(30):
        append_record(store, Record(config={"model": f"m{i % 7}", "batch_size": i, "precision": "fp32"},
                                    environment={"machine": "box" if i % 3 else "中文-box"},
                                    metrics={"total_images_per_sec": 10.0 * i}).to_dict())
    assert main(["results", "list", str(store), "--limit", "0"]) == 0
    by_rich = capsys.readouterr().out
    monkeypatch.setattr(terminal, "MANY_ROWS", 5)
    called = []
    monkeypatch.setattr(terminal, "plain_text", lambda *a, real=terminal.plain_text: called.append(1) or real(*a))
    assert main(["results", "list", str(store), "--limit", "0"]) == 0
    assert capsys.readouterr().out == by_rich and called


@pytest.mark.parametrize("justify", ["left", "right", "center"])
def test_a_no_break_space_a_joiner_or_a_blank_at_the_end_is_laid_out_as_rich_lays_it_out(justify):
    """A machine label typed with a no-break space (a Mac's Option-space) left a table of 100,000 runs
    to rich (about 100 s); a cell ending in a blank was not aligned as rich aligns it (right or
    centred, rich drops the blank). A zero-width space here; a joiner is left to rich (below)."""
    from rich.table import Table

    for shown in ("a\u200b", "bench\u00a007", "\u2066x\u2069", "box ", "e\u0301tude ", "bench\u00a0", "\u00a0",
                  "e\u0301tude\u00a0"):
        table = Table()
        table.add_column("c", justify=justify)
        table.add_row(shown)
        table.add_row("cell")
        expected = terminal.print_table(table, terminal.console_for(io.StringIO())).file.getvalue()
        laid_out = terminal.plain_text(table, terminal.UNLIMITED)
        if shown.endswith("\u00a0"):  # a blank other than the space at the end: left to rich (it may trim it)
            assert laid_out is None, shown
        else:
            assert laid_out == expected, shown


def test_a_records_text_is_shown_as_it_is_on_a_terminal_too(store, capsys, monkeypatch):
    """No emoji made of ``:name:`` in a record's text on a terminal, and past MANY_ROWS a cell that is
    not all printable (a tab, a joiner) leaves the table to rich (a review's findings)."""
    from rich.table import Table

    append_record(store, Record(config={"model": ":thumbs_up:", "batch_size": 8, "precision": "fp32"},
                                environment={"machine": "box"}, metrics={"total_images_per_sec": 1.0}).to_dict())
    monkeypatch.setattr(terminal, "is_terminal", lambda stream: True)
    monkeypatch.setenv("COLUMNS", "300")
    assert main(["results", "list", str(store)]) == 0
    assert ":thumbs_up:" in capsys.readouterr().out
    for machine in (":smile:", "box"):
        append_record(store, Record(config={"model": "resnet18", "batch_size": 8, "precision": "fp32"},
                                    environment={"machine": machine}, metrics={"total_images_per_sec": 1.0}).to_dict())
    assert main(["compare", str(store), "--by", "machine", "--baseline", "box", "--candidate", ":smile:"]) == 0
    assert ":smile:" in capsys.readouterr().out
    for odd in ("a\tb", "x\x08", "a\u2028b", "a\x85", "a\u200d"):
        table = Table()
        table.add_column("c")
        table.add_row(odd)
        assert terminal.plain_text(table, terminal.UNLIMITED) is None
    table = Table()
    table.add_column("c")
    table.add_row("[x] :thumbs_up:")
    assert terminal.plain_text(table, terminal.UNLIMITED) == "c           \n :thumbs_up:\n"  # [x] is markup, as in rich


RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202e]")  # what a terminal acts on: no line break but \n, no ESC


def test_names_from_disk_reach_the_terminal_as_escapes(tmp_path, capsys):
    """A class folder, a bad image's path, a suite's value, a model or machine name in a store, each
    holding an escape sequence or a mark of direction: every line cnnbench prints shows them as
    escapes (``\\x1b``), never raw (a probe saw a class name recolour the terminal and a bad image's
    error split in two)."""
    import subprocess
    import sys

    from cnnbench.data.generate import make_data_set

    odd = "\x1b[31mRED\x1b]0;title\x07\u202e\nx"
    data = tmp_path / "data\x1b[32mGREEN"  # reached through a link of an innocent name: the header names it
    make_data_set("imagefolder", data, num_classes=2, images_per_class=4, val_images_per_class=1, image_size=(40, 30))
    folder = data / "train" / "001_square"
    folder = folder.rename(folder.parent / odd)
    (folder / "bad.jpg").write_bytes(b"no image")
    (data / "val" / "001_square").rename(data / "val" / odd)
    (tmp_path / "innocent").symlink_to(data)
    base = [sys.executable, "-m", "cnnbench", "data", "--data-dir", str(tmp_path / "innocent"), "--batch-size", "2",
            "--num-batches", "4", "--num-workers", "0", "--image-size", "16"]
    for extra in ([], ["--skip-bad-images"]):  # the error naming the image; the log's warning of one skipped
        done = subprocess.run([*base, *extra, "--results-dir", str(tmp_path / "r")], capture_output=True, text=True,
                              timeout=300, check=False)
        assert "bad.jpg" in done.stderr and "\\x1b[31mRED" in done.stdout + done.stderr, done.stderr
        assert not RAW.search(done.stdout + done.stderr), done.stdout + done.stderr
    suite = tmp_path / "s.yaml"
    suite.write_text('name: s\nbase: {model: trivial, device: cpu}\n'
                     'matrix: {machine_label: ["a\\e[31mRED", "b\\u202ec"]}\n')
    assert main(["sweep", str(suite), "--dry-run", "--results-dir", str(tmp_path / "r2")]) == 0
    out = capsys.readouterr().out
    assert "a\\x1b[31mRED" in out and "b\\u202ec" in out and not RAW.search(out), out
    store = tmp_path / "store"
    append_record(store, {**Record(config={"model": "\x1b]0;pwn\x07m", "batch_size": 8, "precision": "fp32",
                                           "num_devices": 1, "device": "cpu"},
                                   environment={"machine": "box\u202e"},
                                   metrics={"total_images_per_sec": 100.0, "forward_time_s": 0.05,
                                            "backward_time_s": 0.1, "optimizer_time_s": 0.01}).to_dict(),
                          "model_cost": {"params": 25_557_032}})
    assert main(["predict", str(store), "--strategy", "replicated"]) == 0
    out, err = capsys.readouterr()
    assert "forward/backward split" in out, out
    assert "\\x1b]0;pwn" in out + err and not RAW.search(out + err), out + err


@pytest.mark.parametrize("columns", ["²", "9" * 5000])
def test_a_columns_variable_of_other_digits_is_no_width(monkeypatch, capsys, columns):
    """COLUMNS=² (a digit to str.isdigit, none to int) ended every table in a ValueError."""
    from rich.table import Table

    from cnnbench.terminal import print_table

    monkeypatch.setenv("COLUMNS", columns)
    table = Table()
    table.add_column("model")
    table.add_row("resnet18")
    print_table(table)
    assert "resnet18" in capsys.readouterr().out
