"""Errors raised on bad input.

Every message names the node, edge, field or device at fault so that a user can fix the
file without a debugger; the CLI prints it as one line and exits non-zero.
"""

__all__ = ["InputError", "CycleError", "InfeasibleError"]


class InputError(ValueError):
    """Malformed or inconsistent input (graph, cluster, placement or config)."""


class CycleError(InputError):
    """The operator graph is not a DAG; the message lists one cycle."""


class InfeasibleError(InputError):
    """The instance admits no feasible placement (memory, affinity, colocation)."""
