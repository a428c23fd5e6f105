"""Worked examples of each kind of plug-in, outside both packages: a benchmark (:mod:`examples.tiny`),
two methods (:mod:`examples.last_n`) and a deployment kind (:mod:`examples.command_server`).
``examples/job.yaml`` runs them together; ``examples/README.md`` walks through them."""
