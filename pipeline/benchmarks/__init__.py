"""The benchmarks: each a package here (or a user's own module) that registers a
:class:`~pipeline.benchmarks.plugin.Benchmark` when imported (see :mod:`pipeline.plugins`)."""
