"""Kinds of table in a report: throughput, implementations, scaling, effects, training, cost, shown, pipeline, systems.
Each module declares its kind (:func:`cnnbench.report.kinds.register`): a new kind is a new module here;
``shown`` makes the tables of every registered field declared ``shown=Shown(...)`` (images per joule).
Imports cnnbench.analysis, report.table/numbers/document/kinds, results, config, words, and models.cost (lazily)."""
