"""The research toolkit: real conversations with labels, retrieval evaluation,
DataFrames of how memory behaves, and plotly figures of it.

* :mod:`.datasets` — LoCoMo conversations loaded into a store;
* :mod:`.evaluation` — recall@k, precision@k, MRR per strategy, threshold sweeps;
* :mod:`.frames` — pandas views (no plotting library needed);
* :mod:`.figures` — plotly figures (the ``notebook`` extra).
"""
