"""Preemption (SPEC 6.4-6.5): who may be a victim, in which order, and the search.

- ``search``: ``search_victims`` and ``VictimSearch`` (greedy pick, then prune);
- ``order``: the victim order as a queue of candidates (6.5);
- ``index``: the kept index of candidates per pool, team and priority;
- ``bounds``: cheap upper bounds that say a search cannot succeed;
- ``exhaust``: the shortcut that answers "would taking everything fit?".
"""
