"""The A2A operations Runyard does not offer, each refused with what to use instead.

Listing tasks and joining a task's stream are served by the Agent Protocol's own routes;
push notifications and an extended agent card are not offered (the agent card says so).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)


class UnofferedOperations(RequestHandler):
    """A request handler's operations that Runyard refuses, with the way to do without."""

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        """Not offered: list a thread's runs through the Agent Protocol instead."""
        raise UnsupportedOperationError(
            message="tasks/list is not offered; "
            "GET /threads/{contextId}/runs lists the runs (tasks) of a context"
        )

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """Not offered: join the run's stream through the Agent Protocol instead."""
        raise UnsupportedOperationError(
            message="tasks/resubscribe is not offered; "
            "GET /threads/{contextId}/runs/{taskId}/stream joins a task's events"
        )
        yield  # an async generator, as the interface declares

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Push notifications are not offered (the agent card says so)."""
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Push notifications are not offered (the agent card says so)."""
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """Push notifications are not offered (the agent card says so)."""
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Push notifications are not offered (the agent card says so)."""
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """There is no extended card: the public one says everything."""
        raise ExtendedAgentCardNotConfiguredError
