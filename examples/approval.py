"""A graph that drafts an action and asks a human to approve it with `interrupt()`."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class ApprovalState(TypedDict, total=False):
    """The requested action and the human's decision."""

    request: str
    draft: str
    approved: bool
    result: str


def draft(state: ApprovalState) -> dict[str, Any]:
    """Prepare the action to approve."""
    return {"draft": f"About to: {state.get('request', 'do nothing')}"}


def ask_human(state: ApprovalState) -> dict[str, Any]:
    """Pause until a human answers; resume with Command(resume=True/False or {...})."""
    answer = interrupt({"question": "Approve this action?", "draft": state.get("draft")})
    approved = answer.get("approved") if isinstance(answer, dict) else bool(answer)
    return {"approved": bool(approved)}


def act(state: ApprovalState) -> dict[str, Any]:
    """Carry out the action, or record the refusal."""
    if state.get("approved"):
        return {"result": f"done: {state.get('request')}"}
    return {"result": "cancelled by the reviewer"}


builder = StateGraph(ApprovalState)
builder.add_node("draft", draft)
builder.add_node("ask_human", ask_human)
builder.add_node("act", act)
builder.add_edge(START, "draft")
builder.add_edge("draft", "ask_human")
builder.add_edge("ask_human", "act")
builder.add_edge("act", END)
graph = builder.compile()
