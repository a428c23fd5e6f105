"""Data that methods read at run time (released prompts), fetched from their public sources.

Each module of this package pins one method's release (:data:`RELEASES` lists them);
``flowstate data fetch methods`` fetches them all. The files go to ``<data dir>/methods/<name>/``, never into the
repository.
"""

from __future__ import annotations

import argparse

from pipeline.benchmarks.method_data.literals import ReleasedPrompts
from pipeline.benchmarks.method_data.reasoningbank import REASONINGBANK
from pipeline.benchmarks.method_data.zipact import ZIPACT
from pipeline.core.cli_hooks import CliHooks

RELEASES: tuple[ReleasedPrompts, ...] = (REASONINGBANK, ZIPACT)


def _fetch(args: argparse.Namespace) -> int:
    for release in sorted(RELEASES, key=lambda r: r.method):
        print(f"{release.method}: {release.fetch(args.data_dir, args.base_url)}")
    return 0


def add_commands(cli: CliHooks) -> None:
    parser = cli.add_fetch("methods", help="the released prompts methods read (ZipAct, ReasoningBank), checksums verified")
    parser.add_argument("--base-url", default=None,
                        help="a mirror laid out as raw.githubusercontent.com (owner/repo/commit/path), for tests")
    parser.set_defaults(handler=_fetch)
