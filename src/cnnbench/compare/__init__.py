"""``cnnbench compare``: pairs the results of two sides and tests each pair (build, sets), then prints them (render).
Imports cnnbench.analysis, results, config, words and terminal; never cnnbench.report.

The Python API's function is :func:`cnnbench.api.compare_results`.
"""
