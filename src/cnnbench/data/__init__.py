"""Input: the input-source protocol and its sources (synthetic batches at three locations).

See :mod:`cnnbench.data.source` for the protocol and the registry of sources.
"""

from cnnbench.data.source import Batch, EpochSource, InputRequest, InputSource, make_input, register_input

__all__ = ["Batch", "EpochSource", "InputRequest", "InputSource", "make_input", "register_input"]
