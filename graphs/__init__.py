"""The problem domain: operator graphs, clusters, placements, I/O, statistics, the
independent evaluator and the discrete-event simulator."""

from dnnplace.graphs.cluster import Cluster, Device, LinkFit, fit_link
from dnnplace.graphs.errors import CycleError, InfeasibleError, InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement, Schedule

__all__ = ["Cluster", "Device", "LinkFit", "fit_link", "CycleError", "InfeasibleError", "InputError",
           "OpGraph", "Instance", "Placement", "Schedule"]
