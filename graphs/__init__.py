"""The problem domain: operator graphs, clusters, placements, I/O, statistics, the
independent evaluator and the discrete-event simulator."""

from graphs.cluster import Cluster, Device, LinkFit, fit_link
from graphs.errors import CycleError, InfeasibleError, InputError
from graphs.graph import OpGraph
from graphs.instance import Instance
from graphs.placement import Placement, Schedule

__all__ = ["Cluster", "Device", "LinkFit", "fit_link", "CycleError", "InfeasibleError", "InputError",
           "OpGraph", "Instance", "Placement", "Schedule"]
