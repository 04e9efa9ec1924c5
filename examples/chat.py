"""A chat agent that works offline: a rule-based model, or a real one when configured.

Set RUNYARD_CHAT_MODEL (for example `openai:gpt-4o-mini`, with the provider's package and
API key installed) to answer with a real chat model through `init_chat_model`.

The rule-based model streams its reply word by word, pausing RUNYARD_CHAT_TOKEN_DELAY
seconds between words (default 0; the root langgraph.json sets a small delay so a person
sees the reply stream in). Ask it for a story to get a long reply. A request starting with
"please" is an action: the agent proposes it ("To book a table, I need your approval."), asks
for approval with `interrupt()`, and carries it out ("Done: book a table.") only when approved.

The approval uses LangChain's human-in-the-loop shape, the one Agent Chat UI renders with
Approve/Reject buttons: the interrupt's value is
`{"action_requests": [{"name", "args", "description"}], "review_configs": [{"action_name",
"allowed_decisions"}]}`, and the run resumes with `{"decisions": [{"type": "approve"}]}` or
`{"decisions": [{"type": "reject", "message": "why"}]}`. A plain answer ("yes", "no", True)
also resumes it, for clients that answer in text. Message content may be a string or a list of
content blocks (as Agent Chat UI sends it); the agent reads their text.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

STORY = (
    "Once upon a time a small server kept a yard of trains. Every night the trains came in "
    "with their cargo of questions, and every morning they left with answers. One stormy "
    "night the power failed halfway through a journey, yet when the lights came back the "
    "train picked up exactly where it had stopped, from its last checkpoint, and nobody lost "
    "a single word. The end."
)
ACTION = "carry_out"
DECISIONS = ["approve", "reject"]
YES = ("yes", "y", "ok", "okay", "sure", "approve", "approved", "go ahead", "true")


def token_delay() -> float:
    """Seconds between two streamed words (RUNYARD_CHAT_TOKEN_DELAY, default 0)."""
    return float(os.environ.get("RUNYARD_CHAT_TOKEN_DELAY") or 0)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text of its content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part if isinstance(part, str) else text_of(part) for part in content]
        return "".join(parts)
    if isinstance(content, dict):
        text = content.get("text") if content.get("type", "text") == "text" else None
        return text if isinstance(text, str) else ""
    return "" if content is None else str(content)


def requested_action(messages: list[BaseMessage]) -> str | None:
    """The action asked for by a last message such as "please book a table", else None."""
    if not messages or not isinstance(messages[-1], HumanMessage):
        return None
    text = text_of(messages[-1].content).strip()
    if text.lower().startswith("please ") and text[7:].strip():
        return text[7:].strip().rstrip(".!")
    return None


class RuleBasedChatModel(BaseChatModel):
    """Answers from a few rules and streams its reply word by word."""

    @property
    def _llm_type(self) -> str:
        return "rule-based"

    def _reply(self, messages: list[BaseMessage]) -> str:
        last = text_of(messages[-1].content) if messages else ""
        lowered = last.lower()
        action = requested_action(messages)
        if action is not None:
            return f"Done: {action}."
        if "story" in lowered:
            return STORY
        if any(word in lowered for word in ("hello", "hi", "hey", "bonjour")):
            return "Hello! I am the Runyard example agent. Ask me anything."
        if "time" in lowered:
            return "I run offline, so I cannot see a clock, but the server can."
        if not last.strip():
            return "You sent an empty message."
        return f"You said: {last}"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = AIMessage(content=self._reply(messages))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        words = self._reply(messages).split(" ")
        for index, word in enumerate(words):
            if index:
                time.sleep(token_delay())
            text = word if index == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
            if run_manager:
                run_manager.on_llm_new_token(text, chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        words = self._reply(messages).split(" ")
        for index, word in enumerate(words):
            if index:
                await asyncio.sleep(token_delay())
            text = word if index == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
            if run_manager:
                await run_manager.on_llm_new_token(text, chunk=chunk)
            yield chunk


def _model() -> BaseChatModel:
    configured = os.environ.get("RUNYARD_CHAT_MODEL")
    if configured:
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found]

        model: BaseChatModel = init_chat_model(configured)
        return model
    return RuleBasedChatModel()


async def respond(state: MessagesState) -> Command[Literal["approve", "__end__"]]:
    """Answer the conversation so far; an action is first proposed, then sent for approval.

    The proposal is an AI message of its own, so the conversation ends with the agent's turn
    while it waits, as with LangChain's middleware (whose AI message carries the tool call):
    Agent Chat UI shows the approval request under the last AI message.
    """
    action = requested_action(state["messages"])
    if action is not None:
        proposal = AIMessage(content=f"To {action}, I need your approval.")
        return Command(update={"messages": [proposal]}, goto="approve")
    reply = await _model().ainvoke(state["messages"])
    return Command(update={"messages": [reply]}, goto=END)


async def approve(state: MessagesState) -> dict[str, Any]:
    """Wait for a human's decision on the proposed action, then carry it out or not.

    Once approved, the model answers the request itself (the conversation up to the human's
    message); the rule-based model reports the action done.
    """
    request = state["messages"][:-1]
    action = requested_action(request) or "do it"
    approved, reason = decision(interrupt(approval_request(action)))
    if approved:
        return {"messages": [await _model().ainvoke(request)]}
    declined = f"All right, I will not {action}."
    if reason:
        declined += f" Your reason: {reason}"
    return {"messages": [AIMessage(content=declined)]}


def approval_request(action: str) -> dict[str, Any]:
    """The interrupt value: one action to review, in LangChain's human-in-the-loop shape."""
    return {
        "action_requests": [
            {"name": ACTION, "args": {"action": action}, "description": f"Shall I {action}?"}
        ],
        "review_configs": [{"action_name": ACTION, "allowed_decisions": list(DECISIONS)}],
    }


def decision(answer: Any) -> tuple[bool, str | None]:
    """(approved, reason) from a resume value.

    `{"decisions": [{"type": "approve"}]}` or `{"type": "reject", "message": ...}` as Agent
    Chat UI sends them; a decision type the request does not allow raises ValueError, as
    LangChain's middleware does. A plain answer (True, "yes", "no", {"approved": true}) is
    read as a yes or a no.
    """
    if isinstance(answer, dict) and "decisions" in answer:
        decisions = answer["decisions"]
        if not isinstance(decisions, list) or len(decisions) != 1:
            raise ValueError(f"expected one decision for one action request, got {decisions!r}")
        chosen = decisions[0] if isinstance(decisions[0], dict) else {}
        kind = chosen.get("type")
        if kind not in DECISIONS:
            raise ValueError(f"decision type {kind!r} is not allowed here; allowed: {DECISIONS}")
        reason = chosen.get("message") if kind == "reject" else None
        return kind == "approve", reason if isinstance(reason, str) and reason else None
    return approves(answer), None


def approves(answer: Any) -> bool:
    """Whether a plain resume value says yes: True, {"approved": true} or a word like "yes"."""
    if isinstance(answer, dict):
        answer = answer.get("approved", answer.get("answer"))
    if isinstance(answer, str):
        return answer.strip().lower().rstrip(".!") in YES
    return answer is True


builder = StateGraph(MessagesState)
builder.add_node("respond", respond)
builder.add_node("approve", approve)
builder.add_edge(START, "respond")
builder.add_edge("approve", END)
graph = builder.compile()
