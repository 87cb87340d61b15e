"""Counts and names as people read them: plurals and natural order (cnnbench.words)."""

from __future__ import annotations

from cnnbench.words import natural_key, plural


def test_plural():
    assert plural(1, "run") == "1 run"
    assert plural(0, "run") == "0 runs"
    assert plural(2, "case") == "2 cases"
    assert plural(3, "class", "classes") == "3 classes"
    assert plural(1200, "run") == "1,200 runs"


def test_natural_key_orders_embedded_numbers_as_numbers():
    names = ["resnet101", "resnet18", "Resnet50", "vgg16", "resnet152", "resnet50_v1.5", "alexnet"]
    assert sorted(names, key=natural_key) == ["alexnet", "resnet18", "Resnet50", "resnet50_v1.5", "resnet101",
                                              "resnet152", "vgg16"]
    assert sorted(["syn-replicated-10gpus", "syn-replicated-2gpus"], key=natural_key)[0] == "syn-replicated-2gpus"


def test_natural_key_sorts_any_mix_of_kinds():
    assert sorted([None, "b2", 10, True, 2.5, "b10", False], key=natural_key) == [False, True, 2.5, 10, "b2", "b10",
                                                                                    None]


def test_counts_in_run_headers_and_report_columns_read_with_the_plural():
    from cnnbench.engine.input_bench import loaders_text
    from cnnbench.engine.log_format import threads_text
    from cnnbench.report.tables.scaling import device_column

    assert threads_text(1, 1, 1) == "1 (1 core)"
    assert threads_text(2, 2, 1) == "2 (2 cores)"
    assert threads_text(1, 1, 2) == "1 per worker (1 core split among 2 workers on this node)"
    assert [loaders_text(n) for n in (1, 2)] == ["1 loader process", "2 loader processes"]
    assert [device_column(n) for n in (1, 8)] == ["1 device", "8 devices"]


def test_natural_key_keeps_the_keys_of_texts_only():
    from cnnbench import words

    words._kept_text_key.cache_clear()
    assert natural_key("resnet50") == natural_key("resnet50") == words._text_key("resnet50")
    assert words._kept_text_key.cache_info().currsize == 1
    assert natural_key([0.5] * 1000) == words._text_key(str([0.5] * 1000))  # a list: keyed, not kept
    assert natural_key({"a": 1}) == words._text_key("{'a': 1}")
    assert words._kept_text_key.cache_info().currsize == 1
