"""A chat agent that works offline: a rule-based model, or a real one when configured.

Set RUNYARD_CHAT_MODEL (for example `openai:gpt-4o-mini`, with the provider's package and
API key installed) to answer with a real chat model through `init_chat_model`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, MessagesState, StateGraph


class RuleBasedChatModel(BaseChatModel):
    """Answers from a few rules and streams its reply word by word."""

    @property
    def _llm_type(self) -> str:
        return "rule-based"

    def _reply(self, messages: list[BaseMessage]) -> str:
        last = str(messages[-1].content) if messages else ""
        lowered = last.lower()
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
    """Answer the conversation so far."""
    reply = await _model().ainvoke(state["messages"])
    return {"messages": [reply]}


builder = StateGraph(MessagesState)
builder.add_node("respond", respond)
builder.add_edge(START, "respond")
builder.add_edge("respond", END)
graph = builder.compile()
