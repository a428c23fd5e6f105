"""The benchmarks: each a package here (or a user's own module) that registers a
:class:`~pipeline.benchmarks.base.Benchmark` when imported (see :mod:`pipeline.core.plugins`)."""
