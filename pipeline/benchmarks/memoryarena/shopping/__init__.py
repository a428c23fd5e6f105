"""Bundled web shopping's store: WebShop's text environment over MemoryArena's product database
(CONTRACT §5.2), searched with BM25 in Python (no Java), loaded once per node."""
