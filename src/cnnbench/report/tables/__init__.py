"""Kinds of table in a report: throughput, implementations, scaling, effects, training, cost, energy, pipeline, systems.
Imports cnnbench.analysis, report.table/numbers/document, results, config, words, and models.cost (lazily, for cost)."""
