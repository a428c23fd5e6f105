"""The deployment kinds, one folder each: its spec, the class that runs it, its engine's profile and
whatever else is its own (server command, model files, tokenizer). Each registers itself when
imported (:func:`pipeline.llm.deployments.registry.register_deployment_kind`) and is listed as an
entry point of its own in ``pyproject.toml``; no other code imports a kind to register it.
"""
