"""The ``cpu`` input pipeline, the default: images decoded and transformed on the host in loader processes.

Each image decoded on the host at reduced size (:mod:`~cnnbench.data.decode`: simplejpeg when
installed, else Pillow; CIFAR's arrays need no decoding), cropped, resized and flipped in uint8
(:mod:`~cnnbench.data.preprocess`) in ``--num-workers`` DataLoader processes, then normalised on
the device (:mod:`~cnnbench.data.loader`).
"""

from __future__ import annotations

from cnnbench.data.catalog import DataSetReader
from cnnbench.data.decode import default_jpeg_decoder
from cnnbench.data.loader import DataSetSource
from cnnbench.data.pipelines import register_pipeline
from cnnbench.data.source import InputRequest, InputSource


@register_pipeline("cpu")
def cpu_pipeline(request: InputRequest, data_set: DataSetReader) -> InputSource:
    """Decoded with the host's JPEG decoder in loader processes (:class:`~cnnbench.data.loader.DataSetSource`)."""
    data_name = request.config.data_name
    if data_name is None:
        raise ValueError("an input pipeline needs a resolved --data-name")
    decoder = None if hasattr(data_set, "image") else default_jpeg_decoder()  # CIFAR: arrays, not files
    return DataSetSource(request, data_set, data_name, jpeg_decoder=decoder)
