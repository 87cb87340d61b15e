"""Input: the input-source protocol and registry (:mod:`cnnbench.data.source`) and its sources.
May import: ``config``, ``machine``, ``results`` (file helpers) and the leaf modules; never distributed or engine.

Sources: synthetic batches at three locations (:mod:`cnnbench.data.synthetic`), and real
data sets (:mod:`cnnbench.data.loader`: ``imagefolder``, ``cifar10``, ``cifar100``) built
from one module per step of their path:

- :mod:`~cnnbench.data.layouts`: the folder layouts, and guessing which one a folder holds;
- :mod:`~cnnbench.data.imagefolder`, :mod:`~cnnbench.data.cifar`: the readers;
  :mod:`~cnnbench.data.catalog` opens the one a configuration names;
- :mod:`~cnnbench.data.pipelines`: how a data set's images become batches (``--input-pipeline``),
  each pipeline the module named after it: ``cpu`` (:mod:`~cnnbench.data.cpu`), the default, is
  :mod:`~cnnbench.data.loader`'s, made of the steps below;
- :mod:`~cnnbench.data.sharding`: which images each worker reads, batch by batch;
- :mod:`~cnnbench.data.decode`: JPEG decoding at reduced size (DCT scaling), other formats;
- :mod:`~cnnbench.data.preprocess`: crops, resizing and flips in uint8 on the host;
- :mod:`~cnnbench.data.normalize`: float, colour jitter and normalisation on the device;
- :mod:`~cnnbench.data.buffers`: the shared-memory batch buffers each loader process reuses;
- :mod:`~cnnbench.data.generate`: small learnable data sets for demos and tests.

The package itself imports nothing heavy, so torch-free modules in it (layouts, readers,
the generator) can be used by the configuration and the command line cheaply.
"""
