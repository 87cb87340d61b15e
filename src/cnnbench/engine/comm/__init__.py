"""``cnnbench comm``: collective bandwidth over message sizes, as nccl-tests measures it.

- :mod:`~cnnbench.engine.comm.spec`: the collectives, sizes, configuration and nccl-tests'
  algbw / busbw definitions (no torch);
- :mod:`~cnnbench.engine.comm.run`: check, start the workers through ``cnnbench run``'s
  launcher (or be a torchrun rank), return rank 0's records;
- :mod:`~cnnbench.engine.comm.worker`: each rank: process group, device, measurement;
- :mod:`~cnnbench.engine.comm.measure`: each collective over the sizes, a record each;
- :mod:`~cnnbench.engine.comm.timing`: one size: warm-up, timed batches of back-to-back calls, the slowest rank's;
- :mod:`~cnnbench.engine.comm.ops`: the torch.distributed calls;
- :mod:`~cnnbench.engine.comm.records`: the ``kind: comm`` records and the printed table.
"""
