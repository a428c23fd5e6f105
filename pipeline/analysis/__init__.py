"""Analysis of finished sweeps: SQL queries over the Parquet tables, compaction, MLflow tracking,
the report (paper Tables 2–4, Figures 3–4) and export to upstream τ-bench results.

Submodules are imported where used, so that ``flowstate query`` does not pay for MLflow and matplotlib.
"""
