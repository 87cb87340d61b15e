"""The analysis layer: statistics of repeats, significance, points, pairing and marks, torch-free.
Imports only cnnbench.results, cnnbench.config, cnnbench.words and the standard/scientific libraries."""
