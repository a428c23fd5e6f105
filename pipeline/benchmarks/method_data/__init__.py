"""Data that methods read at run time (released prompts), fetched from their public sources.

Each module of this package registers one method's fetcher in :data:`FETCHERS`; ``flowstate data
fetch methods`` runs them all. The files go to ``<data dir>/methods/<name>/``, never into the
repository.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

from pipeline.core.cli_hooks import CliError, CliHooks
from pipeline.core.data import BenchmarkDataError

# name -> fetch(data_dir, base_url or None) -> a one-line report
FETCHERS: dict[str, Callable[[Path, str | None], str]] = {}


def _load() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def _fetch(args: argparse.Namespace) -> int:
    _load()
    for name, fetch in sorted(FETCHERS.items()):
        try:
            print(f"{name}: {fetch(args.data_dir, args.base_url)}")
        except BenchmarkDataError as exc:
            raise CliError(str(exc)) from None
    return 0


def add_commands(cli: CliHooks) -> None:
    parser = cli.add_fetch("methods", help="the released prompts methods read (ZipAct, ReasoningBank), checksums verified")
    parser.add_argument("--base-url", default=None,
                        help="a mirror laid out as raw.githubusercontent.com (owner/repo/commit/path), for tests")
    parser.set_defaults(handler=_fetch)
