"""YAML text of the files Runyard writes (compose files, Kubernetes manifests), with no
YAML library: block mappings, block sequences of mappings, and every scalar or scalar list
JSON-encoded, which any YAML reader reads back exactly."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def yaml_lines(value: Mapping[str, Any], depth: int = 0, gap_depth: int = -1) -> list[str]:
    """The lines of a mapping indented `depth` levels; a blank line separates the entries of
    the mappings nested at most `gap_depth` levels deep (compose's services)."""
    lines: list[str] = []
    pad = "  " * depth
    for number, (key, item) in enumerate(value.items()):
        if isinstance(item, Mapping) and item:
            gap = [""] if depth <= gap_depth and number else []
            lines += [*gap, f"{pad}{key}:", *yaml_lines(item, depth + 1, gap_depth)]
        elif isinstance(item, Mapping):
            lines.append(f"{pad}{key}: {{}}")
        elif _has_mappings(item):
            lines += [f"{pad}{key}:", *_sequence_lines(item, depth + 1)]
        else:
            lines.append(f"{pad}{key}: {json.dumps(item)}")
    return lines


def yaml_documents(documents: Sequence[Mapping[str, Any]], header: Sequence[str] = ()) -> str:
    """Several documents in one file, after a header of comment lines."""
    parts = [line if line.startswith("#") else f"# {line}" for line in header]
    for number, document in enumerate(documents):
        parts += [*(["---"] if number else []), *yaml_lines(document)]
    return "\n".join(parts) + "\n"


def _has_mappings(item: Any) -> bool:
    return isinstance(item, list) and any(isinstance(entry, Mapping) for entry in item)


def _sequence_lines(items: Sequence[Any], depth: int) -> list[str]:
    lines: list[str] = []
    pad = "  " * depth
    for entry in items:
        if isinstance(entry, Mapping) and entry:
            # The entry's keys sit one level deeper; its first one follows the dash.
            inner = yaml_lines(entry, depth + 1)
            lines += [f"{pad}- {inner[0].lstrip()}", *inner[1:]]
        else:
            lines.append(f"{pad}- {json.dumps(entry)}")
    return lines
