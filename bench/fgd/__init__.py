"""Helpers of ``bench/fragmentation.py``: a replay of the FGD paper's experiment
(Weng et al., "Beware of Fragmentation", USENIX ATC '23) on the Alibaba 2023 GPU
trace. ``trace`` reads the CSVs and builds the arrival sequence, ``baselines``
holds the simulator's policies (FGD, best-fit, dot-product, random) vectorized
over nodes, ``engine`` runs apportion's placement, ``replay`` measures.
"""
