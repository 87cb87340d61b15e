"""Kinds of table in a report: throughput, implementations, scaling, effects, training, cost, energy, pipeline, systems.
Each module declares its kind (:func:`cnnbench.report.kinds.register`): a new kind is a new module here.
Imports cnnbench.analysis, report.table/numbers/document/kinds, results, config, words, and models.cost (lazily)."""
