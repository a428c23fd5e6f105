"""Analysis of finished sweeps: SQL queries over the Parquet tables, compaction, MLflow tracking,
the report (each benchmark's main table, Tables 3–4, Figures 3–4). Exports to other tools' formats
belong to their benchmarks (``flowstate export <format>``).

Submodules are imported where used, so that ``flowstate query`` does not pay for MLflow and matplotlib.
"""
