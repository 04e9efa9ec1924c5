// A chat page for a Runyard (or any Agent Protocol) server, on `useStream` from
// @langchain/react v1. It speaks the thread streaming session: commands go to
// POST /threads/{id}/commands (run.start, input.respond) and events come from
// POST /threads/{id}/stream/events (SSE), so a reload re-attaches to a running run by itself.
//
// Query parameters: apiUrl (default the `runyard dev` URL), assistant (default "agent"),
// thread (the open conversation, kept in the URL so a reload reopens it), transport
// ("sse", the default, or "websocket").
import { useStream } from "@langchain/react";
import { StrictMode, useCallback, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  type AnyMessage,
  type ChatState,
  Conversation,
  DEFAULT_API_URL,
  type Decision,
  param,
  setThreadParam,
  ThreadList,
} from "./shared";

type Client = ReturnType<typeof useStream>["client"];

// The ids of the interrupts the thread is waiting on, from its state, read again whenever
// the hook's list of interrupts changes while no run is going, and when a run ends.
function usePendingInterruptIds(
  client: Client,
  threadId: string | null,
  interrupts: readonly { id?: string }[],
  busy: boolean,
  finished: number,
): Set<string> {
  const [ids, setIds] = useState<Set<string>>(new Set());
  const listed = interrupts.map((i) => i.id).join(",");
  useEffect(() => {
    if (!threadId || busy || !listed) {
      setIds(new Set());
      return;
    }
    let live = true;
    client.threads
      .getState(threadId)
      .then((state) => {
        const waiting = state.tasks.flatMap((task) => task.interrupts.map((i) => i.id));
        if (live) setIds(new Set(waiting.filter((id): id is string => !!id)));
      })
      .catch(() => live && setIds(new Set()));
    return () => {
      live = false;
    };
  }, [client, threadId, busy, listed, finished]);
  return ids;
}

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
  // The interrupt to answer, by id (input.respond). On a thread opened from the list, the
  // hook may also list interrupts of earlier runs, already answered, replayed from the
  // thread's event log; the card shows only one the thread's state says is pending.
  const busy = stream.isLoading;
  const { threadId: bound, interrupts } = stream;
  const waiting = usePendingInterruptIds(client, bound, interrupts, busy, finished);
  const pending = interrupts.filter((i) => i.id && waiting.has(i.id)).at(-1);
  const respond = (response: unknown) =>
    void stream.respond(response, pending?.id ? { interruptId: pending.id } : undefined);
  const decide = (decision: Decision) => respond({ decisions: [decision] });
  const answer = (text: string) => respond(text);

  const question = pending?.value;
  return (
    <div className="app">
      <ThreadList
        search={search}
        current={threadId}
        refreshKey={`${threadId}:${finished}`}
        onPick={onThreadId}
      />
      <Conversation
        title={"Runyard chat"}
        server={`${assistantId} @ ${apiUrl}`}
        messages={stream.messages as unknown as AnyMessage[]}
        question={question}
        busy={busy}
        error={stream.error}
        onDecide={decide}
        onAnswer={answer}
        onSend={send}
      />
    </div>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Chat />
  </StrictMode>,
);
