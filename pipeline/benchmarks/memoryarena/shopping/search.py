"""Product search without Java: BM25 with ``bm25s`` in place of WebShop's Lucene index (pyserini).

Kept from upstream: the documents (title, description, first bullet point, option texts, lower-cased),
the top 50 hits, Lucene's BM25 (``k1 = 0.9``, ``b = 0.4``, pyserini's defaults; Lucene's IDF), only
documents matching a query term, ties in index order, a query term counted as often as it occurs. The
analyzer follows Lucene's English one as far as plain Python does: lower-case, ``'s`` dropped, Lucene's
33 English stop words, Porter stemming (PyStemmer's ``porter``, as Lucene's ``PorterStemFilter``).
Ranking differences from upstream, stated: words are split on ``\\w+`` (Lucene's StandardTokenizer keeps
``3.5`` or ``e-mail`` together and splits others differently), and Lucene stores each document's length
in one lossy byte (its BM25 uses the rounded length), so scores and near ties can differ.

The index is built once per database and cached on disk beside a manifest that records the products
file's SHA-256, the analyzer version and the SHA-256 of every index file; a cache that does not
match is rebuilt, never trusted.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.atomic import write_json_atomic
from pipeline.core.data import sha256_file

TOP_N = 50
K1, B = 0.9, 0.4
ANALYZER = "flowstate-lucene-english-1"  # bump when the analyzer changes: cached indexes are rebuilt
STOPWORDS = frozenset(("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
                       "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
                       "these", "they", "this", "to", "was", "will", "with"))
_WORD = re.compile(r"\w+")
_POSSESSIVE = re.compile(r"'s\b")
MANIFEST = "index.json"


class Analyzer:
    """Text to terms (stems are cached: a catalogue repeats few distinct words)."""

    def __init__(self) -> None:
        import Stemmer

        self._stemmer = Stemmer.Stemmer("porter")
        self._stems: dict[str, str] = {}

    def terms(self, text: str) -> list[str]:
        words = [w for w in _WORD.findall(_POSSESSIVE.sub("", text.lower())) if w not in STOPWORDS]
        stems = self._stems
        missing = [w for w in set(words) if w not in stems]
        if missing:
            stems.update(zip(missing, self._stemmer.stemWords(missing), strict=True))
        return [stems[w] for w in words]


class SearchIndex:
    """BM25 over the products' documents, in product order."""

    def __init__(self, retriever: Any, size: int) -> None:  # a bm25s.BM25 (bm25s has no type information)
        self._retriever = retriever
        self.size = size
        self._analyzer = Analyzer()

    @classmethod
    def build(cls, documents: Iterable[str]) -> SearchIndex:
        import bm25s

        analyzer = Analyzer()
        vocab: dict[str, int] = {}
        ids: list[list[int]] = []
        for document in documents:
            ids.append([vocab.setdefault(term, len(vocab)) for term in analyzer.terms(document)])
        retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
        retriever.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
        return cls(retriever, len(ids))

    def search(self, keywords: str, n: int = TOP_N) -> list[int]:
        """Positions of the top ``n`` matching products, best first, ties in product order."""
        terms = self._analyzer.terms(keywords)
        ids = self._retriever.get_tokens_ids(terms)
        if not ids or not self.size:
            return []
        scores = np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float64)
        matching = np.flatnonzero(scores > 0)
        if len(matching) > n:
            cut = np.partition(scores[matching], len(matching) - n)[len(matching) - n]
            matching = matching[scores[matching] >= cut]
        order = np.lexsort((matching, -scores[matching]))  # score descending, then position
        return [int(i) for i in matching[order][:n]]

    # -- the on-disk cache -----------------------------------------------------------------------
    def save(self, folder: Path, source_sha256: str) -> None:
        import bm25s

        staging = folder.with_name(f".{folder.name}.building")
        shutil.rmtree(staging, ignore_errors=True)
        self._retriever.save(str(staging))
        files = {p.name: sha256_file(p) for p in sorted(staging.iterdir())}
        write_json_atomic(staging / MANIFEST, {"source_sha256": source_sha256, "analyzer": ANALYZER,
                                               "bm25s": bm25s.__version__, "k1": K1, "b": B, "size": self.size,
                                               "files": files})
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)

    @classmethod
    def load(cls, folder: Path, source_sha256: str) -> SearchIndex | None:
        """The cached index, or ``None`` when it is absent or does not match (then it is rebuilt)."""
        import bm25s

        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, json.JSONDecodeError):
            return None
        expected = {"source_sha256": source_sha256, "analyzer": ANALYZER, "bm25s": bm25s.__version__, "k1": K1, "b": B}
        if any(manifest.get(k) != v for k, v in expected.items()):
            return None
        files: dict[str, str] = manifest.get("files") or {}
        if not files or any(not (folder / name).is_file() or sha256_file(folder / name) != digest
                            for name, digest in files.items()):
            return None
        retriever = bm25s.BM25.load(str(folder), mmap=True, show_progress=False, verbosity=0)
        return cls(retriever, int(manifest["size"]))


def cached_index(folder: Path, source_sha256: str, documents: Callable[[], Iterable[str]]) -> tuple[SearchIndex, bool]:
    """The index from ``folder``, or built from ``documents()`` and saved when the cache does not
    match; also whether it was built now."""
    found = SearchIndex.load(folder, source_sha256)
    if found is not None:
        return found, False
    index = SearchIndex.build(documents())
    index.save(folder, source_sha256)
    return index, True
