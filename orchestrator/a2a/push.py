"""A2A push notifications: a client's webhook hears of its task's updates.

The configs live in the run store (`orchestrator.store.push`), each readable by the caller that
registered it; the a2a-sdk's `BasePushNotificationSender` posts each update (the token in
`X-A2A-Notification-Token`, the credentials in `Authorization`). A webhook must be HTTPS on a
public address unless `BATON_A2A_PUSH_ALLOW_PRIVATE` allows plain HTTP and private addresses
(a service and its clients on one network).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import httpx
from a2a.server.context import ServerCallContext
from a2a.server.tasks import BasePushNotificationSender, PushNotificationConfigStore
from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.types import InvalidParamsError, TaskPushNotificationConfig, TaskStatusUpdateEvent
from a2a.utils.push_url_validator import validate_push_notification_url
from google.protobuf.json_format import MessageToDict, ParseDict

from orchestrator.a2a.tasks import run_updates
from orchestrator.service import RunService
from orchestrator.store import StoredRun

__all__ = ["PushConfigStore", "Pusher", "caller_of"]

logger = logging.getLogger(__name__)
_SEND_TIMEOUT_S = 10.0


def caller_of(context: ServerCallContext) -> str:
    """Who is calling, as a hash of their credentials (the owner of what they register)."""
    headers = {k.lower(): v for k, v in context.state.get("headers", {}).items()}
    return hashlib.sha256(headers.get("authorization", "").encode()).hexdigest()[:16]


class PushConfigStore(PushNotificationConfigStore):
    """The a2a-sdk's config store interface over the run store."""

    def __init__(self, current: Callable[[], Awaitable[RunService]]) -> None:
        self._current = current

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        """Keep the config (normalized: its task, and an id) for the caller."""
        config = normalize_push_notification_config(task_id, notification_config)
        configs = (await self._current()).push_configs
        await configs.put(task_id, config.id, caller_of(context), MessageToDict(config))
        return config

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        """The caller's configs for the task."""
        configs = (await self._current()).push_configs
        return [_config(c) for c in await configs.of(task_id, caller_of(context))]

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """Every config for the task (each was authorized when it was registered)."""
        configs = (await self._current()).push_configs
        return [_config(c) for c in await configs.of(task_id)]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        """Forget the caller's config (None: all of the caller's for the task)."""
        configs = (await self._current()).push_configs
        await configs.remove(task_id, caller_of(context), config_id)


def _config(stored: dict[str, object]) -> TaskPushNotificationConfig:
    config = TaskPushNotificationConfig()
    ParseDict(stored, config)
    return config


class Pusher:
    """Follows the runs that have webhooks, and posts each task update to them."""

    def __init__(
        self, current: Callable[[], Awaitable[RunService]], configs: PushConfigStore, private: bool
    ) -> None:
        self._current = current
        self._private = private
        self._http = httpx.AsyncClient(timeout=_SEND_TIMEOUT_S)
        self._sender = BasePushNotificationSender(
            self._http, configs, push_url_validator=self.acceptable
        )
        self._following: dict[str, asyncio.Task[None]] = {}

    async def check(self, url: str) -> None:
        """Refuse a webhook that is not HTTPS on a public address (unless allowed), saying why."""
        scheme = urlsplit(url).scheme
        if scheme not in ("https", "http") or (scheme == "http" and not self._private):
            raise InvalidParamsError(
                f"push notification url {url!r}: only https webhooks are called "
                "(BATON_A2A_PUSH_ALLOW_PRIVATE allows http on a private network)"
            )
        if not await self.acceptable(url):
            raise InvalidParamsError(
                f"push notification url {url!r} is a private, loopback or reserved address, "
                "or does not resolve (BATON_A2A_PUSH_ALLOW_PRIVATE allows private addresses)"
            )

    async def acceptable(self, url: str) -> bool:
        """Whether a webhook may be called (checked again at each send: DNS may change)."""
        if self._private:
            return urlsplit(url).scheme in ("http", "https")
        return urlsplit(url).scheme == "https" and await validate_push_notification_url(url)

    def follow(self, run: StoredRun) -> None:
        """Push the run's updates from now to its end (once per run, however many webhooks)."""
        if run.finished or run.id in self._following:
            return
        task = asyncio.create_task(self._push(run))
        self._following[run.id] = task
        task.add_done_callback(lambda _: self._following.pop(run.id, None))

    async def _push(self, run: StoredRun) -> None:
        service = await self._current()
        try:
            async for update in run_updates(run, service.events.follow(run)):
                # Status updates only: the answer comes whole with the final state's message.
                if isinstance(update, TaskStatusUpdateEvent):
                    await self._sender.send_notification(run.id, update)
        except Exception:
            logger.exception("push notifications of run %s stopped", run.id)
