"""Issue 20, item 1: study recipes (``cnnbench study NAME|FILE``) and the learning-rate rule of
training to accuracy (``--lr-scaling``)."""

from __future__ import annotations

import pytest

from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.training_options import scaled_learning_rate

# --------------------------------------------------------------------------- the learning-rate rule


def test_linear_scaling_multiplies_the_rate_by_the_device_count():
    assert scaled_learning_rate(0.1, "linear", 1) == pytest.approx(0.1)
    assert scaled_learning_rate(0.1, "linear", 2) == pytest.approx(0.2)
    assert scaled_learning_rate(0.1, "linear", 16) == pytest.approx(1.6)
    assert scaled_learning_rate(0.1, "none", 16) == pytest.approx(0.1)
    assert scaled_learning_rate(0.1, None, 16) == pytest.approx(0.1)


def test_the_rule_is_a_checked_option():
    assert RunConfig(lr_scaling="linear").lr_scaling == "linear"
    with pytest.raises(ConfigError, match="lr.scaling"):
        RunConfig(lr_scaling="sqrt")
    with pytest.raises(ConfigError, match="lr.scaling"):
        RunConfig(lr_scaling="linear", forward_only=True)
