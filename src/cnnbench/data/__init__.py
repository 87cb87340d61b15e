"""Input: the input-source protocol (:mod:`cnnbench.data.source`) and its sources.

Sources: synthetic batches at three locations (:mod:`cnnbench.data.synthetic`). The
package itself imports nothing heavy, so torch-free modules in it (data-set layouts)
can be used by the configuration.
"""
