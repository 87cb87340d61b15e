"""A run on many devices, in one place: start the workers, run each one, gather rank 0's record,
and turn a worker's death into a record that names the rank and the cause.

- :mod:`~cnnbench.engine.multidevice.workers`: ``cnnbench run --num-devices N``: check the run,
  start one worker per device, return rank 0's record (or the failure's);
- :mod:`~cnnbench.engine.multidevice.launch`: starting the workers through torch's elastic
  agent, and naming the worker that failed first (:class:`WorkerFailed`);
- :mod:`~cnnbench.engine.multidevice.worker`: the body of each worker, ours or torchrun's;
- :mod:`~cnnbench.engine.multidevice.watchdog`: under torchrun, rank 0 records a failed rank
  even while its main thread is blocked in a collective;
- :mod:`~cnnbench.engine.multidevice.failure`: the ``error`` / ``oom`` record of a failed run.

The collectives and strategies the workers use are :mod:`cnnbench.distributed`'s.
"""
