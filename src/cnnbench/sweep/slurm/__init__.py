"""Sweeps on a Slurm cluster: a suite's cases submitted through ``submitit`` as job arrays.

:mod:`~cnnbench.sweep.slurm.settings` reads the scheduler options (the suite's ``executor:``
block, per machine label too, and the command line), :mod:`~cnnbench.sweep.slurm.resources`
turns a case into Slurm resources, :mod:`~cnnbench.sweep.slurm.submit` submits,
:mod:`~cnnbench.sweep.slurm.job` runs one case on its node with the local sweep's machinery,
:mod:`~cnnbench.sweep.slurm.ledger` keeps the job ids in ``<results>/.slurm/``,
:mod:`~cnnbench.sweep.slurm.states` asks Slurm (``squeue``, ``sacct``) and
:mod:`~cnnbench.sweep.slurm.follow` shows, records and cancels, and :mod:`~cnnbench.sweep.slurm.executor`
is the ``slurm`` executor (:mod:`cnnbench.sweep.executors`): its flags, its part of the suite's block, what
``sweep`` and ``study`` print. No torch here: the jobs import it.
"""
