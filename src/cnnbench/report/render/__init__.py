"""The report's renderers: markdown (summary.md), HTML (report.html), plots (SVG via matplotlib), tables as CSV/JSON.
Imports report.document/table, cnnbench.analysis, results, machine (usable CPUs for plot workers) and words."""
