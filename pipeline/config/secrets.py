"""What counts as a secret in a job, and the one function that takes secrets out of what is written.

A job's secrets are

- the value of every environment variable a ``*_env`` key names when the rest of the key reads as a
  secret (``api_key_env: OPENAI_API_KEY``: the key itself is never in the job);
- the value given to every ``${NAME}`` whose NAME reads as a secret (:func:`looks_secret`:
  ``OPENAI_API_KEY``, ``HF_TOKEN``, ``DB_PASSWORD``), or whose value holds a URL's password or a
  secret-named query parameter (``tracking_uri: "${MLFLOW_URI}"``), written back as the reference
  ``${NAME}`` (so it can be read again from the environment);
- a string written at a key that reads as a secret (``api_key: ...``, ``Authorization: ...``), and
  the password of a URL (``scheme://user:password@host``) or a URL query parameter named like a
  secret (``?token=...``): ``***``.

:meth:`Secrets.redact` is applied wherever the job is written (the manifest's job and deployments,
MLflow's params and artifacts, the job file as an artifact) and to what ids hash, so no secret
enters a sweep, cell or episode id: a rotated key resumes the same sweep. A value is replaced
wherever it occurs; values shorter than ``MIN_SECRET_CHARS`` are not searched for (``EMPTY``,
the placeholder key of local servers, is no credential, and replacing it inside other text would
mask that text and could change ids with the environment).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import yaml

from pipeline.config.variables import compose_as_written, construct, expand_variables

REDACTED = "***"
MIN_SECRET_CHARS = 8
# Words of a name that mark its value as a secret (a name's words: split at non-alphanumerics and
# at lower-to-upper case changes, compared lower-cased).
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "passphrase", "credential",
                          "credentials", "auth", "authorization", "cookie"})
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", re.ASCII)
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@?#]*:)([^\s@/?#]+)(@)")
_QUERY_PARAMETER = re.compile(r"([?&;])([^=&;#\s]+)=([^&;#\s]*)")

T = TypeVar("T")


@cache
def _words(name: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in _WORDS.findall(name))


def looks_secret(name: str) -> bool:
    """Whether a variable or key name reads as a secret's: one of its words is in ``SECRET_WORDS``,
    and it does not end in ``env`` (``api_key_env`` holds a variable's name, not a key)."""
    words = _words(name)
    return bool(words) and words[-1] != "env" and not SECRET_WORDS.isdisjoint(words)


def names_secret_variable(key: str) -> bool:
    """``api_key_env``, ``token_env``: a key whose value names the variable that holds a secret."""
    words = _words(key)
    return len(words) > 1 and words[-1] == "env" and not SECRET_WORDS.isdisjoint(words[:-1])


def _already_redacted(text: str) -> bool:
    """A reference (``${NAME}``) or ``***``: what redaction writes, left as it is."""
    return _REFERENCE.fullmatch(text) is not None or text == REDACTED


def redact_url(text: str) -> str:
    """``text`` with URL passwords and secret-named query parameters written as ``***``."""
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m.group(0) if _already_redacted(m.group(2))
                                 else f"{m.group(1)}{REDACTED}{m.group(3)}", text)
    if "=" in text and ("?" in text or "&" in text):
        text = _QUERY_PARAMETER.sub(lambda m: m.group(0) if not looks_secret(m.group(2)) or _already_redacted(m.group(3))
                                    else f"{m.group(1)}{m.group(2)}={REDACTED}", text)
    return text


@dataclass(frozen=True)
class Secrets:
    """The secret values of one job, each with what is written in its place."""

    replacements: Mapping[str, str] = field(default_factory=dict)  # secret value -> "${NAME}" or "***"

    @classmethod
    def of_job(cls, job: Any, variables: Mapping[str, str] | None = None,
               environ: Mapping[str, str] | None = None) -> Secrets:
        """``job``: the job as JSON-like data; ``variables``: the references its file used (name -> value)."""
        environ = os.environ if environ is None else environ
        replacements: dict[str, str] = {}
        for name in _named_variables(job):
            if len(environ.get(name) or "") >= MIN_SECRET_CHARS:
                replacements[environ[name]] = REDACTED
        for name, value in (variables or {}).items():
            if len(value or "") >= MIN_SECRET_CHARS and (looks_secret(name) or redact_url(value) != value):
                replacements.setdefault(value, f"${{{name}}}")
        return cls(replacements)

    def redact(self, data: T) -> T:
        """``data`` (JSON-like: dicts, lists, strings, numbers) with every secret replaced: known values
        wherever they occur, strings at secret-named keys, URL passwords. Idempotent."""
        return _redact(data, sorted(self.replacements.items(), key=lambda kv: -len(kv[0])), under_secret=False)


def _redact(data: Any, replacements: list[tuple[str, str]], under_secret: bool) -> Any:
    if isinstance(data, str):
        for value, replacement in replacements:
            if value in data:
                data = data.replace(value, replacement)
        data = redact_url(data)
        return data if not under_secret or _already_redacted(data) else REDACTED
    if isinstance(data, Mapping):
        return {_redact(k, replacements, False): _redact(v, replacements, isinstance(k, str) and looks_secret(k))
                for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(_redact(v, replacements, under_secret) for v in data)
    return data


def _named_variables(data: Any) -> set[str]:
    """Variables the job names as holding secrets (the values of ``api_key_env`` and the like)."""
    found: set[str] = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                if isinstance(key, str) and names_secret_variable(key) and isinstance(value, str):
                    found.add(value)
                else:
                    stack.append(value)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


def restore(value: str, where: str) -> str:
    """A value written redacted, read again: its ``${NAME}`` references from the environment. A
    ``***`` (a secret the job file held literally, or a URL password) cannot be read back."""
    if REDACTED in value:
        raise ValueError(f"{where} holds a secret the job file wrote literally, which is not kept: put it in an "
                         "environment variable and write ${NAME} in the job, or give the value again")
    return expand_variables(value, where)


def redacted_job_text(path: Path, environ: Mapping[str, str] | None = None) -> str:
    """The job file's text as written, with the secrets it holds literally replaced (``${NAME}``
    references stay: the file never holds their values)."""
    text = path.read_text(encoding="utf-8")
    try:
        data = construct(compose_as_written(text))
    except yaml.YAMLError:
        data = None  # not a job one could run; written as it is, URL passwords still masked
    replacements = dict(Secrets.of_job(data, environ=environ).replacements)
    replacements.update({value: REDACTED for value in _literal_secrets(data)})
    for value, replacement in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(value, replacement)
    return redact_url(text)


def _literal_secrets(data: Any) -> set[str]:
    """Strings a job file holds at secret-named keys, other than references."""
    found: set[str] = set()
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        item, secret = stack.pop()
        if isinstance(item, str):
            if secret and REDACTED not in item and "${" not in item:
                found.add(item)
        elif isinstance(item, Mapping):
            stack.extend((v, isinstance(k, str) and looks_secret(k)) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, secret) for v in item)
    return found
