"""Run a plan: one OS process per device, ``torch.distributed`` between them.

* :mod:`~dnnplace.pytorch.execution.program` -- the per-device programs of a placed, ordered
  training step (what each device runs, what it sends and receives);
* :mod:`~dnnplace.pytorch.execution.worker` -- one device's process: rebuild, trace, run, time;
* :mod:`~dnnplace.pytorch.execution.launch` -- spawn the processes, wait under a deadline,
  compare the step with an eager single-process step.
"""
