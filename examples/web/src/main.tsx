// A chat page for a Runyard (or any Agent Protocol) server, on `useStream` from
// @langchain/react v1. It speaks the thread streaming session: commands go to
// POST /threads/{id}/commands (run.start, input.respond) and events come from
// POST /threads/{id}/stream/events (SSE), so a reload re-attaches to a running run by itself.
//
// Query parameters: apiUrl (default the `runyard dev` URL), assistant (default "agent"),
// thread (the open conversation, kept in the URL so a reload reopens it), transport
// ("sse", the default, or "websocket").
import { useStream } from "@langchain/react";
import { StrictMode, useCallback, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  type AnyMessage,
  type ChatState,
  Composer,
  DEFAULT_API_URL,
  type Decision,
  Header,
  InterruptCard,
  Messages,
  param,
  setThreadParam,
  ThreadList,
} from "./shared";

function Chat() {
  const apiUrl = param("apiUrl") ?? DEFAULT_API_URL;
  const assistantId = param("assistant") ?? "agent";
  const transport = param("transport") === "websocket" ? "websocket" : "sse";
  const [threadId, setThreadId] = useState<string | null>(param("thread"));
  const [finished, setFinished] = useState(0);

  const onThreadId = useCallback((id: string | null) => {
    setThreadId(id);
    setThreadParam(id);
  }, []);

  const stream = useStream<ChatState>({
    apiUrl,
    assistantId,
    transport,
    threadId,
    onThreadId,
    onCompleted: () => setFinished((n) => n + 1),
  });
  const client = stream.client;
  const search = useCallback(
    (query: Parameters<typeof client.threads.search>[0]) => client.threads.search(query),
    [client],
  );

  // Content as a list of content blocks, as Agent Chat UI and LangChain v1 send it.
  const send = (text: string) =>
    void stream.submit({ messages: [{ type: "human", content: [{ type: "text", text }] }] });
  // The newest pending interrupt, answered by id (input.respond). After switching to a thread
  // the hook may also list an interrupt of an earlier run that is already answered, replayed
  // from the thread's event log; without an id it could pick that one.
  const pending = stream.interrupts[stream.interrupts.length - 1];

  const respond = (response: unknown) =>
    void stream.respond(response, pending?.id ? { interruptId: pending.id } : undefined);
  const decide = (decision: Decision) => respond({ decisions: [decision] });
  const answer = (text: string) => respond(text);

  const question = pending?.value;
  const busy = stream.isLoading;
  const status = busy ? "streaming…" : question != null ? "waiting for your answer" : "idle";
  return (
    <div className="app">
      <ThreadList
        search={search}
        current={threadId}
        refreshKey={`${threadId}:${finished}`}
        onPick={onThreadId}
      />
      <main>
        <Header title="Runyard chat" status={status} server={`${assistantId} @ ${apiUrl}`} />
        <Messages messages={stream.messages as unknown as AnyMessage[]} />
        {question != null && !busy && (
          <InterruptCard value={question} onDecide={decide} onAnswer={answer} />
        )}
        {stream.error != null && (
          <div className="error" data-testid="error">
            {String((stream.error as Error).message ?? stream.error)}
          </div>
        )}
        <Composer disabled={busy || question != null} onSend={send} />
      </main>
    </div>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Chat />
  </StrictMode>,
);
