"""``cnnbench compare``: pairs the results of two sides and tests each pair (build, sets), then prints them (render).
Imports cnnbench.analysis, results, config, words and terminal; never cnnbench.report.

The package is also callable, as the Python API's :func:`cnnbench.api.compare`.
"""
