"""sketch: the schedule IR (loop state, transform steps, bound inference, lowering) and the search.

Importing it registers the schedule entry points of ``compute``'s ``ComputeDAG`` (see
``dag_schedule``).
"""
from . import dag_schedule  # noqa: F401 - registers ComputeDAG's schedule backend
