"""``results export --format csv`` writes each row's values at once and converts only the
cells that need it, found by the row's types (issue 22 item 3): the CSV is the same, cell for
cell, as converting every cell, whatever types a column holds from one row to the next."""

from __future__ import annotations

import csv
import io
import json

from cnnbench.results.export import FlatTable, _write_csv
from cnnbench.results.flatten import flatten_record


def reference(table: FlatTable) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        cells = []
        for c in table.columns:
            v = row.get(c)
            if v is None:
                cells.append("")
            elif isinstance(v, bool):
                cells.append("true" if v else "false")
            elif isinstance(v, (list, dict)):
                cells.append(json.dumps(v, separators=(",", ":")))
            else:
                cells.append(v)
        writer.writerow(cells)
    return out.getvalue()


def test_cells_of_every_type_in_any_order_read_as_converting_each():
    values = [True, False, 1, 1.5, "x, \"quoted\"", None, [1, 2], {"a": [1]}, [0.5, 0.25], 10**20, ""]
    rows = []
    for i in range(60):  # each column meets each type, in rows whose types repeat and differ
        rows.append({f"c{j}": values[(i * (j + 1) + j) % len(values)] for j in range(6) if (i + j) % 7})
    rows += [rows[3]] * 3
    table = FlatTable(rows, [f"c{j}" for j in range(6)] + ["missing"])
    out = io.StringIO()
    _write_csv(table, out)
    assert out.getvalue() == reference(table)


def test_flattening_a_record_of_leaves_and_nested_sections():
    rec = {"status": "ok", "config": {"model": "m", "flags": {"a": 1}, "lr": None},
           "metrics": {"x": [1.0], "tele": {"gpu": {"w": 3.0}}}, "empty": {}}
    expected = {"status": "ok", "config.model": "m", "config.flags.a": 1, "config.lr": None, "metrics.x": [1.0],
                "metrics.tele.gpu.w": 3.0}
    for _ in range(2):  # the second time from the joined names kept
        assert flatten_record(rec) == expected
        assert list(flatten_record(rec)) == list(expected)
    for rec in ({"config": {"model": "n", "lr": 0.1}}, {"config": {"model": "n", "batch": 2}},
                {"environment": {"model": "n", "batch": 2}}):  # other keys or another prefix
        section, = rec
        assert flatten_record(rec) == {f"{section}.{k}": v for k, v in rec[section].items()}


def test_a_record_flattened_by_its_shape_equals_the_walk_of_it():
    """Records whose keys are text (read from JSON) are flattened at once from their shape's
    names, a section with dicts in it walked once; the row (keys, order, values) is the one the
    value-by-value walk gives, and any other record takes the walk."""
    from types import MappingProxyType

    from cnnbench.results import flatten

    def walked(rec, sep="."):
        out = {}
        flatten._flatten_into(out, "", rec, sep)
        return out

    records = [
        {"status": "ok", "config": {"model": "m", "batch_size": 8}, "metrics": {"x": [1.0], "y": None}},
        {"config": {}, "status": "ok", "metrics": {"x": 1.5, "warnings": ["busy"]}, "repeat": 2},
        {"config.model": "dotted", "config": {"model": "nested"}},  # the later name wins, as in the walk
        {"config": {"model": "n", "flags": {"a": 1}}, "status": "error"},  # nested deeper: its section walked
        {"config": MappingProxyType({"model": "p"}), "status": "ok"},  # not a dict: walked
        {"status": "ok", "metrics": {"x": 1.5, "warnings": ["busy"]}, "repeat": 2, "config": {}},  # other order
        {1: "x", "1": "y"}, {True: {"a": 0}}, {"s": {1: 0}}, {"s": {True: 0}},  # keys not from JSON: walked
    ]
    for rec in records * 2:  # the second time from the names kept
        for sep in (".", "/"):
            got = flatten.flatten_record(rec, sep)
            assert got == walked(rec, sep) and list(got) == list(walked(rec, sep))
    assert flatten._flatten_planned(records[0], ".") is not None and flatten._flatten_planned(records[3], ".")
    assert flatten._flatten_planned(records[4], ".") is None


def test_records_sharing_sections_flatten_as_each_alone():
    """Sections records share (a lazy or ``shared`` read's) are taken apart once; every row is
    still the one its record gives alone, whatever the sharing, the order or a nested section."""
    from cnnbench.results.flatten import flatten_records

    config = {"model": "m", "batch_size": 8}
    env = {"machine": "box", "cores": 2}
    nested = {"model": "n", "flags": {"a": 1}}
    records = []
    for i in range(12):
        records.append({"status": "ok", "config": config if i % 3 else dict(config, batch_size=i),
                        "environment": env, "metrics": {"x": float(i), "steps": [0.1] * (i % 2)}})
    records[5] = {"config": nested, "status": "error", "environment": env}
    records[7] = {"environment": env, "status": "ok", "config": config}  # another order of keys
    records.append(records[1])  # the same record twice
    rows = flatten_records(records)
    for sep in (".", "/"):
        again = flatten_records(records, sep)
        for rec, row in zip(records, again, strict=True):
            assert row == flatten_record(rec, sep) and list(row) == list(flatten_record(rec, sep))
    assert rows == [flatten_record(r) for r in records]


def test_sections_made_and_dropped_one_after_another_are_never_taken_for_each_other(monkeypatch):
    """A generator's records are gone once flattened, and a new section may then have a freed
    one's ``id``: it is still read for itself (here every section has the same ``id``)."""
    from cnnbench.results import flatten

    monkeypatch.setattr(flatten, "id", lambda obj: 1, raising=False)
    fresh = ({"config": {"model": f"m{i}", "batch_size": i}} for i in range(20))
    shared = {"model": "s", "batch_size": 0}
    again = [{"config": shared}] * 3
    expected = [{"config.model": f"m{i}", "config.batch_size": i} for i in range(20)]
    assert flatten.flatten_records([*fresh, *again]) == expected + [{"config.model": "s", "config.batch_size": 0}] * 3


def test_a_section_changed_between_records_of_a_generator_is_read_as_it_is_then():
    from cnnbench.results.flatten import flatten_records, records_frame

    def made_in_turn():
        config = {"model": "a"}
        for model in "abc":
            config["model"] = model
            yield {"config": config}

    assert [r["config.model"] for r in flatten_records(made_in_turn())] == ["a", "b", "c"]
    assert list(records_frame(made_in_turn())["config.model"]) == ["a", "b", "c"]
