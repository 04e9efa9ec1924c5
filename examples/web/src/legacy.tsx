// The chat page on the legacy hook, `useStream` from @langchain/langgraph-sdk/react: the one
// Agent Chat UI uses. It streams runs over /threads/{id}/runs/stream (messages-tuple) and
// rejoins a run after a reload through reconnectOnMount.
//
// Query parameters: apiUrl (default the `runyard dev` URL), assistant (default "agent"),
// thread (the open conversation; kept in the URL so a reload reopens it and, through
// reconnectOnMount, rejoins a run still streaming).
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";
import { StrictMode, useCallback, useMemo, useState } from "react";
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

function Chat() {
  const apiUrl = param("apiUrl") ?? DEFAULT_API_URL;
  const assistantId = param("assistant") ?? "agent";
  const [threadId, setThreadId] = useState<string | null>(param("thread"));
  const [finished, setFinished] = useState(0);
  const client = useMemo(() => new Client({ apiUrl }), [apiUrl]);
  const search = useCallback(
    (query: Parameters<Client["threads"]["search"]>[0]) => client.threads.search(query),
    [client],
  );

  const onThreadId = useCallback((id: string | null) => {
    setThreadId(id);
    setThreadParam(id);
  }, []);

  const stream = useStream<ChatState>({
    client,
    assistantId,
    threadId,
    onThreadId,
    // A reload in the middle of a run rejoins its stream (the run id is kept in
    // sessionStorage); the SDK replays the run's events and then follows it live.
    reconnectOnMount: true,
    onFinish: () => setFinished((n) => n + 1),
  });

  const send = (text: string) => {
    const message = { type: "human", content: text };
    stream.submit(
      { messages: [message] },
      {
        optimisticValues: (prev: Partial<ChatState>) => ({
          ...prev,
          messages: [...(prev.messages ?? []), message],
        }),
      },
    );
  };
  // As Agent Chat UI resumes a human-in-the-loop interrupt: a command with the decisions.
  const decide = (decision: Decision) =>
    stream.submit({}, { command: { resume: { decisions: [decision] } } });
  const answer = (text: string) => stream.submit(undefined, { command: { resume: text } });

  const question = stream.interrupt?.value;
  const busy = stream.isLoading;
  return (
    <div className="app">
      <ThreadList
        search={search}
        current={threadId}
        refreshKey={`${threadId}:${finished}`}
        onPick={onThreadId}
      />
      <Conversation
        title={"Runyard chat (legacy hook)"}
        server={`${assistantId} @ ${apiUrl}`}
        messages={stream.messages as AnyMessage[]}
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
