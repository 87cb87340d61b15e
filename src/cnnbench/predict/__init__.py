"""``cnnbench predict``: images/sec, speedup, efficiency and bound at N devices on M nodes, from one
device's record, the model's gradient bytes, a link description and the input pipeline.

Torch-free (above :mod:`cnnbench.analysis`): :mod:`.links` (link kinds and defaults),
:mod:`.collectives` (collective times), :mod:`.model` (the step of each strategy),
:mod:`.bases` (records to bases), :mod:`.calibrate` (``--calibrate``), :mod:`.scaling` (the one
call), :mod:`.render` (table, CSV, JSON). ``docs/predict.md`` writes the model down.
"""

from cnnbench.predict.model import STRATEGIES, Base, Prediction, Scenario, predict
from cnnbench.predict.scaling import LinkChoice, PredictError, PredictOptions, PredictResult, Row, predict_scaling

__all__ = ["STRATEGIES", "Base", "LinkChoice", "PredictError", "PredictOptions", "PredictResult", "Prediction", "Row",
           "Scenario", "predict", "predict_scaling"]
