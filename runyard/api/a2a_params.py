"""A2A params refused before the SDK reads them, as the caller's error (-32602 naming the
field), where the SDK would answer otherwise.

The SDK's A2A 0.3 adapter answers a params field of the wrong type as an invalid *request*
(-32600, with pydantic's text), and writes a number past 32 bits into its protocol buffers
unchecked: that raises, is logged with a traceback and answered as an internal error
(-32603). The 1.0 names already answer both as invalid params.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from pydantic import BaseModel, ValidationError

# `historyLength` is an int32 of A2A's protocol buffers; a negative one asks for nothing.
MAX_HISTORY_LENGTH = 2**31 - 1


def params_problem(message: Any) -> str | None:
    """What is wrong with the params of an A2A JSON-RPC request, naming the field; None
    when the SDK may read them (or when the request itself is malformed: the SDK answers)."""
    if not isinstance(message, dict) or not isinstance(message.get("params"), dict):
        return None
    for where, value in _history_lengths(message["params"]):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{where}: must be an integer, got {value!r}"
        if not 0 <= value <= MAX_HISTORY_LENGTH:
            return f"{where}: must be from 0 to {MAX_HISTORY_LENGTH}, got {value}"
    return _v0_3_problem(message)


def _history_lengths(params: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """`historyLength` where the methods read it: tasks/get, and a send's configuration."""
    if "historyLength" in params:
        yield "params.historyLength", params["historyLength"]
    configuration = params.get("configuration")
    if isinstance(configuration, dict) and "historyLength" in configuration:
        yield "params.configuration.historyLength", configuration["historyLength"]


def _v0_3_problem(message: dict[str, Any]) -> str | None:
    """The first params field a 0.3 method's model refuses, as `field: reason`."""
    # The SDK declares the mapping's values as metaclasses; they are pydantic models.
    model = cast(
        "type[BaseModel] | None", JSONRPC03Adapter.METHOD_TO_MODEL.get(str(message.get("method")))
    )
    if model is None:
        return None
    try:
        model.model_validate(message)
    except ValidationError as exc:
        for error in exc.errors():
            loc = error.get("loc", ())
            if loc and loc[0] == "params":
                # Union members' model names (`TextPart`) are no field of the request.
                where = ".".join(str(p) for p in loc if not str(p)[:1].isupper())
                return f"{where}: {error.get('msg')}"
    return None
