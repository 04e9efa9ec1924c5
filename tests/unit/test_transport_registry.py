"""A transport backend is one entry of TRANSPORTS: opened by the instance's kind, it brings
its parts and declares which errors of its client mean an outage (503 "retry shortly")."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest

from runyard.api.errors import is_store_outage
from runyard.domain.errors import ConfigError
from runyard.domain.group_caps import GroupCaps
from runyard.loops import LoopGroup
from runyard.settings import Settings
from runyard.wiring import transport
from runyard.wiring.transport_contract import Transport, TransportNeeds


class BackendDown(Exception):
    """What a made-up backend's client raises when its server is out of reach."""


def _needs(stack: AsyncExitStack, **settings: Any) -> TransportNeeds:
    async def stop_run(*_args: Any) -> bool:
        return False

    return TransportNeeds(
        Settings(_env_file=None, **settings),  # type: ignore[call-arg]
        stack,
        lambda name, grace: LoopGroup(name, grace),
        stop_run,
        None,  # type: ignore[arg-type]
        "test-instance",
        GroupCaps(),
    )


async def test_a_new_backend_is_one_entry_and_declares_its_outage_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def open_made_up(needs: TransportNeeds) -> Transport:
        parts = await transport.open_in_process_transport(needs)
        return Transport(parts.broker, parts.queue, parts.cancel_bus, outage_errors=(BackendDown,))

    monkeypatch.setitem(transport.TRANSPORTS, "in-process", open_made_up)
    assert not is_store_outage(BackendDown("down"))
    async with AsyncExitStack() as stack:
        opened = await transport.open_transport(_needs(stack))
    assert opened.outage_errors == (BackendDown,)
    assert is_store_outage(BackendDown("down"))
    assert not is_store_outage(ValueError("a bug"))


async def test_an_unknown_kind_is_refused_naming_the_backends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Settings, "queue_kind", property(lambda _self: "carrier-pigeon"))
    async with AsyncExitStack() as stack:
        with pytest.raises(ConfigError, match=r"carrier-pigeon.*in-process, redis"):
            await transport.open_transport(_needs(stack))
