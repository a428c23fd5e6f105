"""The commands the hints print, as they work when typed: ``flowstate report ...`` where the
``flowstate`` on PATH is the one running, else its path (``.venv/bin/flowstate report ...``, with the
environment not activated); ``mlflow`` likewise, from the environment that runs."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def flowstate_command(args: str) -> str:
    """``flowstate <args>`` as the user can type it to run this very installation."""
    return f"{_runnable('flowstate', _running_flowstate())} {args}"


def mlflow_command(args: str) -> str:
    """``mlflow <args>``: the MLflow of the environment that runs, as the user can type it."""
    return f"{_runnable('mlflow', _beside_python('mlflow'))} {args}"


def _running_flowstate() -> Path | None:
    """The ``flowstate`` script that runs (``sys.argv[0]``), else this environment's."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.name == "flowstate" and started.is_file():
        return started
    return _beside_python("flowstate")


def _beside_python(name: str) -> Path | None:
    """The script ``name`` installed with the running interpreter (the venv's ``bin/``), if any.
    ``sys.executable`` is not resolved: a venv's python is a link to the system's."""
    script = Path(sys.executable).parent / name
    return script if script.is_file() else None


def _runnable(name: str, script: Path | None) -> str:
    """``name`` where PATH finds ``script`` by it; else the script's path (relative when under the
    current folder); with no script, the module run by this interpreter."""
    if script is None:
        return f"{sys.executable} -m {'pipeline.cli' if name == 'flowstate' else name}"
    found = shutil.which(name)
    if found is not None and os.path.samefile(found, script):
        return name
    try:
        relative = script.absolute().relative_to(Path.cwd())
    except ValueError:
        return str(script.absolute())
    return str(relative) if relative.parent != Path(".") else f"./{relative}"
