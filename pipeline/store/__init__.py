"""Trajectory storage: explicit Parquet schemas, atomic per-episode files, visibility of compacted
files, DuckDB reads.

Nothing is imported here: episode actors write rows and never read them, so importing a writer
must not load DuckDB (import the submodules).
"""
