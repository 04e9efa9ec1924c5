"""A chat agent that works offline: a rule-based model, or a real one when configured.

Set RUNYARD_CHAT_MODEL (for example `openai:gpt-4o-mini`, with the provider's package and
API key installed) to answer with a real chat model through `init_chat_model`.

The rule-based model streams its reply word by word, pausing RUNYARD_CHAT_TOKEN_DELAY
seconds between words (default 0; the root langgraph.json sets a small delay so a person
sees the reply stream in). Ask it for a story to get a long reply. A request starting with
"please" is an action: the agent asks for approval with `interrupt()` first, and carries it
out only when resumed with a yes.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

STORY = (
    "Once upon a time a small server kept a yard of trains. Every night the trains came in "
    "with their cargo of questions, and every morning they left with answers. One stormy "
    "night the power failed halfway through a journey, yet when the lights came back the "
    "train picked up exactly where it had stopped, from its last checkpoint, and nobody lost "
    "a single word. The end."
)
YES = ("yes", "y", "ok", "okay", "sure", "approve", "approved", "go ahead", "true")


def token_delay() -> float:
    """Seconds between two streamed words (RUNYARD_CHAT_TOKEN_DELAY, default 0)."""
    return float(os.environ.get("RUNYARD_CHAT_TOKEN_DELAY") or 0)


def requested_action(messages: list[BaseMessage]) -> str | None:
    """The action asked for by a last message such as "please book a table", else None."""
    if not messages or not isinstance(messages[-1], HumanMessage):
        return None
    text = str(messages[-1].content).strip()
    if text.lower().startswith("please ") and text[7:].strip():
        return text[7:].strip().rstrip(".!")
    return None


class RuleBasedChatModel(BaseChatModel):
    """Answers from a few rules and streams its reply word by word."""

    @property
    def _llm_type(self) -> str:
        return "rule-based"

    def _reply(self, messages: list[BaseMessage]) -> str:
        last = str(messages[-1].content) if messages else ""
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


async def respond(state: MessagesState) -> dict[str, Any]:
    """Answer the conversation so far; ask for approval before carrying out an action."""
    action = requested_action(state["messages"])
    if action is not None:
        answer = interrupt({"question": f"Shall I {action}?", "action": action})
        if not approves(answer):
            return {"messages": [AIMessage(content=f"All right, I will not {action}.")]}
    reply = await _model().ainvoke(state["messages"])
    return {"messages": [reply]}


def approves(answer: Any) -> bool:
    """Whether a resume value says yes: True, {"approved": true} or a word such as "yes"."""
    if isinstance(answer, dict):
        answer = answer.get("approved", answer.get("answer"))
    if isinstance(answer, str):
        return answer.strip().lower().rstrip(".!") in YES
    return answer is True


builder = StateGraph(MessagesState)
builder.add_node("respond", respond)
builder.add_edge(START, "respond")
builder.add_edge("respond", END)
graph = builder.compile()
