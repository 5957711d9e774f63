"""What a run needs from its process, below every algorithm: wall-clock deadlines counted from
the process start, delivered into code that checks none, and Ctrl-C redelivered where
Python would drop it (:mod:`dnnplace.runtime.deadline`); the run's memory limit, held through
the same deadlines by a watchdog of the resident memory (:mod:`dnnplace.runtime.memory`).
Imports nothing of the project."""
