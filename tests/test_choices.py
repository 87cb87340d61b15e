"""The names of the choices live once (config.choices); every name has exactly one
implementation, every implementation a name, and the options' choices are those names."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.choices import DATA_NAMES, REAL_DATA_NAMES, Declared
from cnnbench.config.input_rules import INPUT_RULES
from cnnbench.config.options import field_choices, field_help
from cnnbench.config.strategy_rules import STRATEGY_RULES, VARIABLE_UPDATES
from cnnbench.data.source import register_input, registered_inputs
from cnnbench.distributed.strategy import ParallelStrategy, register_strategy, registered_strategies


def test_every_variable_update_has_exactly_one_strategy_and_every_strategy_a_name():
    strategies = registered_strategies()
    assert sorted(strategies) == sorted(VARIABLE_UPDATES)
    assert len(set(strategies.values())) == len(strategies)  # one class per name
    for name, cls in strategies.items():
        assert cls.name == name
        assert cls.declared is STRATEGY_RULES[name]
    assert tuple(STRATEGY_RULES) == VARIABLE_UPDATES  # one declaration a name, in the Literal's order


def test_every_data_name_has_exactly_one_input_source_and_every_source_a_name():
    sources = registered_inputs()
    assert sorted(sources) == sorted(DATA_NAMES)
    for name, source in sources.items():
        assert name in source.declared.names
        assert source.declared is INPUT_RULES[name]
    factories = {source.factory for source in sources.values()}
    assert len(factories) == len({source.declared for source in sources.values()})
    assert sorted(INPUT_RULES) == sorted(DATA_NAMES)


def test_the_options_choices_are_the_declared_names_in_help_order():
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    assert field_choices(fields["data_name"]) == ("synthetic", "imagefolder", "cifar10", "cifar100")
    assert field_choices(fields["variable_update"]) == VARIABLE_UPDATES
    assert field_choices(fields["data_name"]) == DATA_NAMES
    assert DATA_NAMES[1:] == REAL_DATA_NAMES


def test_the_variable_update_help_is_each_declarations_words_in_help_order():
    """Issue 45: a strategy's words in ``--variable-update``'s help are written in its declaration."""
    help_text = field_help(next(f for f in dataclasses.fields(RunConfig) if f.name == "variable_update"))
    words = ", ".join(f"{name} ({STRATEGY_RULES[name].help})" for name in VARIABLE_UPDATES)
    assert help_text == f"How devices share variables (tf_cnn_benchmarks' word): {words}."


def test_a_name_outside_the_choices_or_twice_is_refused():
    class Stray(ParallelStrategy):
        declared = Declared(("stray",))  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="not a --variable-update choice"):
        register_strategy(Stray)

    class Twice(ParallelStrategy):
        declared = STRATEGY_RULES["replicated"]

    registered_strategies()
    with pytest.raises(ValueError, match="registered twice"):
        register_strategy(Twice)
    registered_inputs()
    with pytest.raises(ValueError, match="registered twice"):
        register_input(INPUT_RULES["synthetic"])(lambda request: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="not a --data-name choice"):
        register_input(Declared(("mnist",)))(lambda request: None)  # type: ignore[arg-type,return-value]


class _Fields:
    """A configuration's fields without its checks (what a strategy's ``validate`` reads)."""

    def __init__(self, **values):
        defaults = {f.name: f.default for f in dataclasses.fields(RunConfig)}
        self.__dict__.update({**defaults, **values})

    def warmup_steps(self):
        return self.num_warmup_batches if self.num_warmup_batches is not None else 5


OWN_RULES = [
    ({"variable_update": "fsdp", "data_format": "NHWC"}, "data_format"),
    ({"variable_update": "parameter_server", "precision": "amp_fp16"}, "precision"),
    ({"variable_update": "parameter_server", "forward_only": True}, "variable_update"),
    ({"variable_update": "replicated", "forward_only": True, "static_graph": True}, "static_graph"),
    ({"variable_update": "replicated", "gradient_compression": "powersgd", "num_warmup_batches": 1},
     "num_warmup_batches"),
]
OTHER_STRATEGIES_OPTIONS = [
    ({"variable_update": "independent", "all_reduce": "gloo"}, "all_reduce"),
    ({"variable_update": "fsdp", "static_graph": True}, "static_graph"),
    ({"variable_update": "replicated", "local_parameter_device": "cpu"}, "local_parameter_device"),
]


@pytest.mark.parametrize(("options", "field"), OWN_RULES)
def test_each_strategy_validates_its_own_rules(options, field):
    with pytest.raises(ConfigError) as caught:
        RunConfig(model="trivial", **options)
    assert caught.value.field == field
    strategy = registered_strategies()[options["variable_update"]]
    with pytest.raises(ConfigError) as own:
        strategy.validate(_Fields(model="trivial", **options))
    assert str(own.value) == str(caught.value)
    strategy.validate(_Fields(model="trivial", variable_update=options["variable_update"]))  # the defaults pass


@pytest.mark.parametrize(("options", "field"), OTHER_STRATEGIES_OPTIONS)
def test_an_option_of_another_strategy_is_refused(options, field):
    with pytest.raises(ConfigError) as caught:
        RunConfig(model="trivial", **options)
    assert caught.value.field == field
    assert field not in registered_strategies()[options["variable_update"]].options()


def test_each_input_source_validates_its_own_rules():
    synthetic, real = registered_inputs()["synthetic"].declared, registered_inputs()["cifar10"].declared
    with pytest.raises(ConfigError, match="--distortions: augments real images"):
        synthetic.validate(_Fields(distortions=True))
    with pytest.raises(ConfigError, match="--data-name: cifar10 is read from a folder"):
        real.validate(_Fields(data_name="cifar10"))
    assert "synthetic_location" in synthetic.options and "resize_method" in real.options


def test_the_declarations_and_config_stay_torch_free():
    code = ("import sys, cnnbench.config.choices, cnnbench.config.strategy_rules, cnnbench.config.input_rules, "
            "cnnbench.config; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
