// A chat page for a Runyard (or any Agent Protocol) server, built on useStream.
//
// Query parameters: apiUrl (default the `runyard dev` URL), assistant (default "agent"),
// thread (the open conversation; kept in the URL so a reload reopens it and, through
// reconnectOnMount, rejoins a run still streaming).
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";
import { StrictMode, useCallback, useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";

const DEFAULT_API_URL = "http://127.0.0.1:2024";

type AnyMessage = {
  id?: string;
  type?: string;
  content?: unknown;
  getType?: () => string;
  _getType?: () => string;
};
type ChatState = { messages: AnyMessage[] };
type Question = { question?: string; action?: string };
type ThreadRow = { thread_id: string; updated_at: string; status: string; values?: unknown };

function param(name: string): string | null {
  return new URLSearchParams(window.location.search).get(name);
}

function setThreadParam(threadId: string | null): void {
  const url = new URL(window.location.href);
  if (threadId) url.searchParams.set("thread", threadId);
  else url.searchParams.delete("thread");
  window.history.replaceState(null, "", url);
}

function roleOf(message: AnyMessage): string {
  if (typeof message.getType === "function") return message.getType();
  if (typeof message._getType === "function") return message._getType();
  return message.type ?? "ai";
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "string" ? part : (part as { text?: string }).text ?? ""))
      .join("");
  }
  return content == null ? "" : JSON.stringify(content);
}

function titleOf(thread: ThreadRow): string {
  const messages = (thread.values as Partial<ChatState> | null)?.messages ?? [];
  const first = messages.find((m) => roleOf(m) === "human");
  return first ? textOf(first.content) : "(empty conversation)";
}

function ThreadList(props: {
  client: Client;
  current: string | null;
  refreshKey: string;
  onPick: (threadId: string | null) => void;
}) {
  const { client, current, refreshKey, onPick } = props;
  const [threads, setThreads] = useState<ThreadRow[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    client.threads
      .search({ limit: 30, sortBy: "updated_at", sortOrder: "desc" })
      .then((rows) => live && (setThreads(rows as ThreadRow[]), setError(null)))
      .catch((err: unknown) => live && setError(String(err)));
    return () => {
      live = false;
    };
  }, [client, refreshKey]);
  return (
    <aside>
      <button className="new-chat" onClick={() => onPick(null)}>
        + New chat
      </button>
      <h2>History</h2>
      {error && <div className="error">{error}</div>}
      <ul data-testid="thread-list">
        {threads.map((thread) => (
          <li
            key={thread.thread_id}
            className={thread.thread_id === current ? "current" : ""}
            data-thread-id={thread.thread_id}
          >
            <button onClick={() => onPick(thread.thread_id)}>
              <span className="thread-title">{titleOf(thread)}</span>
              <span className="thread-meta">
                {thread.status} · {new Date(thread.updated_at).toLocaleTimeString()}
              </span>
            </button>
          </li>
        ))}
      </ul>
    </aside>
  );
}

function Chat() {
  const apiUrl = param("apiUrl") ?? DEFAULT_API_URL;
  const assistantId = param("assistant") ?? "agent";
  const [threadId, setThreadId] = useState<string | null>(param("thread"));
  const [draft, setDraft] = useState("");
  const [answer, setAnswer] = useState("");
  const [finished, setFinished] = useState(0);
  const client = useMemo(() => new Client({ apiUrl }), [apiUrl]);

  const onThreadId = useCallback((id: string | null) => {
    setThreadId(id);
    setThreadParam(id);
  }, []);

  const stream = useStream<ChatState, { InterruptType: Question }>({
    client,
    assistantId,
    threadId,
    onThreadId,
    // A reload in the middle of a run rejoins its stream (the run id is kept in
    // sessionStorage); the SDK replays the run's events and then follows it live.
    reconnectOnMount: true,
    onFinish: () => setFinished((n) => n + 1),
  });

  const send = (event: React.FormEvent) => {
    event.preventDefault();
    const text = draft.trim();
    if (!text || stream.isLoading) return;
    setDraft("");
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

  const resume = (event: React.FormEvent) => {
    event.preventDefault();
    const text = answer.trim();
    if (!text) return;
    setAnswer("");
    stream.submit(undefined, { command: { resume: text } });
  };

  const question = stream.interrupt?.value;
  const busy = stream.isLoading;
  const messages = stream.messages as AnyMessage[];
  return (
    <div className="app">
      <ThreadList
        client={client}
        current={threadId}
        refreshKey={`${threadId}:${finished}`}
        onPick={onThreadId}
      />
      <main>
        <header>
          <h1>Runyard chat</h1>
          <span className="status" data-testid="status">
            {busy ? "streaming…" : question ? "waiting for your answer" : "idle"}
          </span>
          <span className="server">
            {assistantId} @ {apiUrl}
          </span>
        </header>
        <section className="messages" data-testid="messages">
          {messages.length === 0 && (
            <p className="empty">
              Say hello, ask for a story, or ask for an action such as “please book a table”.
            </p>
          )}
          {messages.map((message, index) => {
            const role = roleOf(message);
            return (
              <div
                key={message.id ?? index}
                className={`message ${role === "human" ? "human" : "ai"}`}
                data-role={role}
              >
                {textOf(message.content)}
              </div>
            );
          })}
        </section>
        {question && !busy && (
          <form className="interrupt" data-testid="interrupt" onSubmit={resume}>
            <span className="question">{question.question ?? JSON.stringify(question)}</span>
            <input
              type="text"
              aria-label="Your answer"
              placeholder="yes or no"
              value={answer}
              onChange={(e) => setAnswer(e.target.value)}
            />
            <button className="primary" type="submit">
              Answer
            </button>
          </form>
        )}
        {stream.error != null && (
          <div className="error" data-testid="error">
            {String((stream.error as Error).message ?? stream.error)}
          </div>
        )}
        <form className="composer" onSubmit={send}>
          <input
            type="text"
            aria-label="Message"
            placeholder="Type a message"
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
          />
          <button className="primary" type="submit" disabled={busy || !!question}>
            Send
          </button>
        </form>
      </main>
    </div>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Chat />
  </StrictMode>,
);
