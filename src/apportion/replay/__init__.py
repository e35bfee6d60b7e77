"""``apportion replay``: a trace through the simulator under apportion's policy
and the ones users would pick instead, side by side (docs/replay.md).

- ``trace``: the rows every importer yields (:class:`TraceJob`, :class:`Trace`);
- ``alibaba``, ``csvtrace``, ``scenario_trace``: the three importers;
- ``org``: ORG.yaml, mapping rows to teams, classes and priorities;
- ``policies``: the five policies, each an org view plus an engine Policy;
- ``metrics``: the measures, from a run's final states;
- ``runner``: every policy on the same input; ``report``: results.json,
  report.html and the charts.
"""
