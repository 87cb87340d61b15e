"""Tables in the terminal: as wide as COLUMNS; plain text (no colour, no box lines) when piped."""

from __future__ import annotations

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
