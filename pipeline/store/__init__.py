"""Trajectory storage: explicit Parquet schemas, atomic per-episode files, visibility of compacted files, DuckDB reads."""

from pipeline.store.reader import done_episodes
from pipeline.store.schema import SCHEMA_VERSION, SCHEMAS, TABLES
from pipeline.store.writer import episode_file, write_episode, write_parquet_atomic

__all__ = ["SCHEMAS", "SCHEMA_VERSION", "TABLES", "done_episodes", "episode_file", "write_episode",
           "write_parquet_atomic"]
