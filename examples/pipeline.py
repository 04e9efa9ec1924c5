"""A multi-step pipeline that reports its progress as custom stream events."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class PipelineState(TypedDict, total=False):
    """The text to process and what each step made of it."""

    text: str
    steps: Annotated[list[str], operator.add]
    word_count: int
    summary: str


def tokenize(state: PipelineState) -> dict[str, Any]:
    """Split the text into words."""
    writer = get_stream_writer()
    words = state.get("text", "").split()
    writer({"step": "tokenize", "progress": 33, "words": len(words)})
    return {"steps": ["tokenize"], "word_count": len(words)}


def analyze(state: PipelineState) -> dict[str, Any]:
    """Find the longest word."""
    writer = get_stream_writer()
    words = state.get("text", "").split()
    longest = max(words, key=len) if words else ""
    writer({"step": "analyze", "progress": 66, "longest": longest})
    return {"steps": ["analyze"], "summary": f"longest word: {longest!r}"}


def report(state: PipelineState) -> dict[str, Any]:
    """Write the final summary."""
    writer = get_stream_writer()
    writer({"step": "report", "progress": 100})
    summary = f"{state.get('word_count', 0)} words, {state.get('summary', '')}"
    return {"steps": ["report"], "summary": summary}


builder = StateGraph(PipelineState)
builder.add_node("tokenize", tokenize)
builder.add_node("analyze", analyze)
builder.add_node("report", report)
builder.add_edge(START, "tokenize")
builder.add_edge("tokenize", "analyze")
builder.add_edge("analyze", "report")
builder.add_edge("report", END)
graph = builder.compile()
