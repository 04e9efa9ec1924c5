"""Imported relatively by the graph, which works only when the graph is `app.graph`."""


def signature() -> str:
    """What the graph appends to its answer."""
    return " (from app)"
