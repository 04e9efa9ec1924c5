"""Cron use cases: create (stateful or stateless), read, patch, delete, search, count."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import crons as crons_db
from runyard.db import threads as threads_db
from runyard.db.dialect import database_now
from runyard.db.engine import Sessions
from runyard.domain.configurable import AUTH_USER_ID_KEY, reserved_only, without_reserved
from runyard.domain.cron import CronRecord
from runyard.domain.cron_schedule import (
    first_run_date,
    parse_timezone,
    require_min_interval,
    validate_schedule,
)
from runyard.domain.encrypted_fields import CRON_PAYLOAD_FIELDS
from runyard.domain.encryption_context import CONTEXT_KEY, current_context
from runyard.domain.errors import InvalidInputError, NotFoundError
from runyard.domain.user_bounds import check_cron_room
from runyard.encryption.encrypted_json import opened_cron, sealed
from runyard.outbound.guard import WebhookGuard
from runyard.schemas.crons import (
    RUN_FIELDS,
    CronCount,
    CronCreate,
    CronPatch,
    CronSearch,
    ThreadCronCreate,
)
from runyard.services.assistants import AssistantService
from runyard.services.encrypted_filters import refuse_encrypted_keys
from runyard.services.runs import new_id

if TYPE_CHECKING:
    from runyard.encryption.at_rest import AtRest
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.crons")

# Changing any of these (or enabling the cron) moves the next run date to the first
# occurrence after now: a re-enabled cron does not fire for the time it was off.
_RESCHEDULING = ("schedule", "timezone", "end_time")


def to_wire(cron: CronRecord) -> dict[str, Any]:
    """The Agent Protocol view of a cron (its JSON as given: `CronService.opened` first),
    timestamps as ISO 8601 strings, its creator's encryption context (encryption.path) left
    out of the payload."""
    payload = cron.payload or {}
    if CONTEXT_KEY in payload:
        payload = {k: v for k, v in payload.items() if k != CONTEXT_KEY}
    return {
        "cron_id": cron.cron_id,
        "assistant_id": cron.assistant_id,
        "thread_id": cron.thread_id,
        "on_run_completed": cron.on_run_completed,
        "end_time": _iso(cron.end_time),
        "schedule": cron.schedule,
        "timezone": cron.timezone,
        "created_at": cron.created_at.isoformat(),
        "updated_at": cron.updated_at.isoformat(),
        "payload": payload,
        "user_id": cron.user_id,
        "next_run_date": _iso(cron.next_run_date),
        "metadata": cron.metadata or {},
        "enabled": cron.enabled,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True, slots=True)
class CronPage:
    """One page of a cron search: its crons (JSON decrypted), the offset of the next page
    when there is one, and the database's clock when the search selects fields."""

    crons: list[CronRecord]
    next_offset: int | None
    now: datetime | None = None

    def to_wire(self, select: Sequence[str] | None) -> list[dict[str, Any]]:
        """The page as clients receive it: `to_wire` of each cron, only the fields selected
        (`now` is the server's clock)."""
        page = [to_wire(cron) for cron in self.crons]
        if not select:
            return page
        fields = list(dict.fromkeys(select))
        stamp = self.now.isoformat() if self.now is not None else None
        return [{f: (stamp if f == "now" else wire[f]) for f in fields} for wire in page]


def cron_not_found(cron_id: str) -> NotFoundError:
    """The error for a cron id nobody knows."""
    return NotFoundError(f"cron {cron_id} not found; list crons with POST /runs/crons/search")


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def owner_configurable(payload: dict[str, Any]) -> dict[str, Any]:
    """The creator's user keys stored in a cron's run payload."""
    return reserved_only(((payload.get("config") or {}).get("configurable")) or {})


def _keep_owner(payload: dict[str, Any], owner: dict[str, Any]) -> None:
    if not owner:
        return
    config = payload["config"] = dict(payload.get("config") or {})
    config["configurable"] = {**without_reserved(config.get("configurable") or {}), **owner}


def _thread_not_found(thread_id: str) -> NotFoundError:
    return NotFoundError(f"thread {thread_id} not found; create it first with POST /threads")


def _patched_values(current: CronRecord, body: CronPatch, sent: set[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if body.schedule is not None:
        values["schedule"] = body.schedule
    if "timezone" in sent:
        values["timezone"] = body.timezone
    if "end_time" in sent:  # an explicit null clears the end time
        values["end_time"] = _utc(body.end_time)
    if body.enabled is not None:
        values["enabled"] = body.enabled
    if body.on_run_completed is not None:
        if current.thread_id is not None:
            raise InvalidInputError(
                "on_run_completed applies to stateless crons only (created with POST "
                "/runs/crons); this cron runs on thread " + current.thread_id
            )
        values["on_run_completed"] = body.on_run_completed
    if body.metadata is not None:
        values["metadata"] = {**(current.metadata or {}), **body.metadata}
    run_fields = [f for f in sent if f in RUN_FIELDS]
    if run_fields:
        payload = dict(current.payload or {})
        for field in run_fields:
            value = getattr(body, field)
            if value is None:
                payload.pop(field, None)
            else:
                payload[field] = body.model_dump(include={field})[field]
        # A new config keeps the creator the runs act for.
        _keep_owner(payload, owner_configurable(current.payload or {}))
        values["payload"] = payload
    return values


class CronService:
    """Cron use cases: schedules of runs, stateful or stateless."""

    def __init__(
        self,
        sessions: Sessions,
        autocommit: Sessions,
        assistants: AssistantService,
        webhook_guard: WebhookGuard,
        min_interval_seconds: int,
        max_per_user: int,
        at_rest: AtRest | None,
        encryption: CustomEncryption | None,
        wake_scheduler: Callable[[], None],
    ) -> None:
        self.sessions = sessions
        self.autocommit = autocommit
        self.assistants = assistants
        self.webhook_guard = webhook_guard
        self.min_interval_seconds = min_interval_seconds
        self.max_per_user = max_per_user
        self.at_rest = at_rest
        self.encryption = encryption
        self.wake_scheduler = wake_scheduler

    async def opened(self, cron: CronRecord) -> CronRecord:
        """A stored cron with its metadata and payload decrypted (encryption.path)."""
        return await opened_cron(self, cron)

    async def create_cron(
        self,
        thread_id: str | None,
        body: ThreadCronCreate | CronCreate,
        owner: dict[str, Any] | None = None,
    ) -> CronRecord:
        """Validate the schedule and timezone, then store the cron with its first run date.

        `owner` is the creator's user keys of `configurable`: every run of the cron carries them.
        """
        zone = await self._checked_zone(body)
        assistant = await self.assistants.get_assistant(body.assistant_id)
        payload = await self._run_payload(body, assistant.assistant_id, owner or {})
        metadata = await sealed(self, "cron", "metadata", body.metadata or {})
        end_time = _utc(body.end_time)
        cron_id = new_id()
        try:
            async with self.sessions() as session, session.begin():
                if (
                    thread_id is not None
                    and await threads_db.get_thread(session, thread_id) is None
                ):
                    raise _thread_not_found(thread_id)
                await self._require_room(session, (owner or {}).get(AUTH_USER_ID_KEY))
                now = await database_now(session)
                cron = await crons_db.insert_cron(
                    session,
                    {
                        "cron_id": cron_id,
                        "assistant_id": assistant.assistant_id,
                        "thread_id": thread_id,
                        "user_id": (owner or {}).get(AUTH_USER_ID_KEY),
                        "schedule": body.schedule,
                        "timezone": body.timezone,
                        "payload": payload,
                        "metadata": metadata,
                        "on_run_completed": (
                            body.on_run_completed if isinstance(body, CronCreate) else None
                        ),
                        "enabled": body.enabled,
                        "end_time": end_time,
                        "next_run_date": first_run_date(body.schedule, zone, end_time, now),
                        "created_at": now,
                        "updated_at": now,
                    },
                )
        except IntegrityError:
            # The thread or assistant was deleted while the cron was being created.
            if thread_id is not None:
                raise _thread_not_found(thread_id) from None
            raise NotFoundError(f"assistant {body.assistant_id} was deleted meanwhile") from None
        self.wake_scheduler()
        log.info(
            "cron_created cron_id=%s thread_id=%s schedule=%s", cron_id, thread_id, body.schedule
        )
        return await self.opened(cron)

    async def _checked_zone(self, body: ThreadCronCreate | CronCreate) -> tzinfo:
        """The cron's timezone, once its schedule, interval and webhook are found valid."""
        zone = parse_timezone(body.timezone)
        validate_schedule(body.schedule)
        require_min_interval(body.schedule, self.min_interval_seconds)
        if body.webhook is not None:
            await self.webhook_guard.check(body.webhook)
        return zone

    async def _run_payload(
        self,
        body: ThreadCronCreate | CronCreate,
        assistant_id: str,
        owner: dict[str, Any],
    ) -> dict[str, Any]:
        """What each run of the cron is created from, sealed when encryption is on."""
        payload = body.model_dump(include=set(RUN_FIELDS), exclude_none=True)
        payload["assistant_id"] = assistant_id
        _keep_owner(payload, owner)
        if self.encryption is not None:
            # The cron's runs are written under its creator's encryption context.
            payload[CONTEXT_KEY] = current_context()
            payload = await self.encryption.encrypt_fields("cron", payload, CRON_PAYLOAD_FIELDS)
        return payload

    async def get_cron(self, cron_id: str) -> CronRecord:
        """The cron, its JSON decrypted, or NotFoundError."""
        async with self.autocommit() as session:
            cron = await crons_db.get_cron(session, cron_id)
        if cron is None:
            raise cron_not_found(cron_id)
        return await self.opened(cron)

    async def patch_cron(self, cron_id: str, body: CronPatch) -> CronRecord:
        """Change the fields sent; a new schedule, timezone, end time or enabling reschedules."""
        sent = set(body.model_fields_set)
        if not sent:
            raise InvalidInputError(
                "nothing to update: send at least one of schedule, timezone, end_time, enabled, "
                "metadata, on_run_completed, input, config, context, webhook"
            )
        if body.schedule is not None:
            validate_schedule(body.schedule)
            require_min_interval(body.schedule, self.min_interval_seconds)
        if body.timezone is not None:
            parse_timezone(body.timezone)
        if body.webhook is not None:
            await self.webhook_guard.check(body.webhook)
        async with self.sessions() as session, session.begin():
            # Writing updated_at first locks the row, so concurrent merges are not lost.
            now = await database_now(session)
            current = await crons_db.update_cron(session, cron_id, {"updated_at": now})
            if current is None:
                raise cron_not_found(cron_id)
            values = _patched_values(await self.opened(current), body, sent)
            if "metadata" in values:
                values["metadata"] = await sealed(self, "cron", "metadata", values["metadata"])
            if "payload" in values and self.encryption is not None:
                # Sealed again whole, under the context of the cron's creator its runs use.
                creator = values["payload"].get(CONTEXT_KEY)
                values["payload"] = await self.encryption.encrypt_fields(
                    "cron", values["payload"], CRON_PAYLOAD_FIELDS, creator
                )
            enabling = body.enabled is True and not current.enabled
            if enabling or any(field in sent for field in _RESCHEDULING):
                merged = replace(current, **values)
                zone = parse_timezone(merged.timezone)
                values["next_run_date"] = first_run_date(
                    merged.schedule, zone, merged.end_time, now
                )
            cron = await crons_db.update_cron(session, cron_id, values) if values else current
            assert cron is not None
        self.wake_scheduler()
        log.info("cron_updated cron_id=%s fields=%s", cron_id, ",".join(sorted(sent)))
        return await self.opened(cron)

    async def _require_room(self, session: AsyncConnection, user_id: str | None) -> None:
        """OverBoundError when the user has RUNYARD_MAX_CRONS_PER_USER crons already, enabled
        or not."""
        await crons_db.lock_user_crons(session, user_id)
        check_cron_room(await crons_db.count_user_crons(session, user_id), self.max_per_user)

    async def delete_cron(self, cron_id: str) -> None:
        """Delete a cron; runs it already created are left alone."""
        async with self.sessions() as session, session.begin():
            if not await crons_db.delete_cron(session, cron_id):
                raise cron_not_found(cron_id)
        log.info("cron_deleted cron_id=%s", cron_id)

    def _query(
        self, body: CronSearch | CronCount, auth_filter: dict[str, Any] | None
    ) -> crons_db.CronQuery:
        assistant_id = body.assistant_id
        if assistant_id is not None:
            try:
                assistant_id = self.assistants.resolve_assistant_id(assistant_id)
            except NotFoundError:
                raise InvalidInputError(
                    f"assistant_id {assistant_id!r} is neither a UUID nor a graph id"
                ) from None
        refuse_encrypted_keys(self.at_rest, metadata=body.metadata)
        if self.encryption is not None:
            self.encryption.refuse_filter("metadata filter", body.metadata)
        return crons_db.CronQuery(
            assistant_id=assistant_id,
            thread_id=body.thread_id,
            enabled=getattr(body, "enabled", None),
            metadata=body.metadata,
            auth_filter=auth_filter,
        )

    async def search_crons(
        self, body: CronSearch, auth_filter: dict[str, Any] | None = None
    ) -> CronPage:
        """One page of crons, their JSON decrypted, and the offset of the next page when
        there is one."""
        query = self._query(body, auth_filter)
        async with self.autocommit() as session:
            crons = await crons_db.search_crons(
                session,
                query,
                sort_by=body.sort_by,
                descending=body.sort_order == "desc",
                limit=body.limit + 1,
                offset=body.offset,
            )
            now = await database_now(session) if body.select else None
        next_offset = body.offset + body.limit if len(crons) > body.limit else None
        opened = [await self.opened(cron) for cron in crons[: body.limit]]
        return CronPage(opened, next_offset, now)

    async def count_crons(self, body: CronCount, auth_filter: dict[str, Any] | None = None) -> int:
        """How many crons match the filters (and the caller's auth filter)."""
        query = self._query(body, auth_filter)
        async with self.autocommit() as session:
            return await crons_db.count_crons(session, query)
