"""The switch that keeps tests from calling real model providers.

A module of its own, without litellm, so that Ray's `worker_process_setup_hook` can flip it in
every worker cheaply (`agents.models.safety.forbid_remote_models`).
"""

from __future__ import annotations

from agents.core.spec import ModelSpec

__all__ = ["RemoteModelsForbidden", "check_model_allowed", "forbid_remote_models"]

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_remote_models_allowed = True


class RemoteModelsForbidden(RuntimeError):
    """A model call would have left this machine while remote models are forbidden."""


def forbid_remote_models() -> None:
    """Refuse every model call except Baton's built-in models and servers on loopback.

    Test suites call this in every process (Ray's `worker_process_setup_hook` included), so that
    no test can reach a real provider by accident.
    """
    global _remote_models_allowed
    _remote_models_allowed = False


def _is_local(spec: ModelSpec) -> bool:
    if spec.name.startswith("baton/"):
        return True
    base = str(spec.params.get("api_base") or spec.params.get("base_url") or "")
    host = base.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0] if base else ""
    return host in _LOOPBACK_HOSTS or base.split("://", 1)[-1].startswith("[::1]")


def check_model_allowed(spec: ModelSpec) -> None:
    """Raise `RemoteModelsForbidden` if remote models are forbidden here and `spec` is one."""
    if not _remote_models_allowed and not _is_local(spec):
        raise RemoteModelsForbidden(f"model {spec.name!r} would call a remote provider")
