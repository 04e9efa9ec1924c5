// What both pages share: URL parameters, message text, the thread list, the approval card.
import { useEffect, useState } from "react";

export const DEFAULT_API_URL = "http://127.0.0.1:2024";

export type AnyMessage = {
  id?: string;
  type?: string;
  content?: unknown;
  getType?: () => string;
  _getType?: () => string;
};
export type ChatState = { messages: AnyMessage[] };
export type ThreadRow = { thread_id: string; updated_at: string; status: string; values?: unknown };

// LangChain's human-in-the-loop request (HumanInTheLoopMiddleware), as Agent Chat UI renders it.
export type ActionRequest = { name: string; args: Record<string, unknown>; description?: string };
export type ReviewConfig = { action_name: string; allowed_decisions: string[] };
export type HITLRequest = { action_requests: ActionRequest[]; review_configs: ReviewConfig[] };
export type Decision = { type: "approve" } | { type: "reject"; message?: string };

export function param(name: string): string | null {
  return new URLSearchParams(window.location.search).get(name);
}

export function setThreadParam(threadId: string | null): void {
  const url = new URL(window.location.href);
  if (threadId) url.searchParams.set("thread", threadId);
  else url.searchParams.delete("thread");
  window.history.replaceState(null, "", url);
}

export function roleOf(message: AnyMessage): string {
  if (typeof message.getType === "function") return message.getType();
  if (typeof message._getType === "function") return message._getType();
  return message.type ?? "ai";
}

export function textOf(content: unknown): string {
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

export function isHITLRequest(value: unknown): value is HITLRequest {
  const request = value as Partial<HITLRequest> | null;
  return (
    !!request &&
    Array.isArray(request.action_requests) &&
    request.action_requests.length > 0 &&
    Array.isArray(request.review_configs)
  );
}

type SearchThreads = (query: {
  limit: number;
  sortBy: "updated_at";
  sortOrder: "desc";
}) => Promise<unknown[]>;

export function ThreadList(props: {
  search: SearchThreads;
  current: string | null;
  refreshKey: string;
  onPick: (threadId: string | null) => void;
}) {
  const { search, current, refreshKey, onPick } = props;
  const [threads, setThreads] = useState<ThreadRow[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    search({ limit: 30, sortBy: "updated_at", sortOrder: "desc" })
      .then((rows) => live && (setThreads(rows as ThreadRow[]), setError(null)))
      .catch((err: unknown) => live && setError(String(err)));
    return () => {
      live = false;
    };
  }, [search, refreshKey]);
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

export function Messages(props: { messages: AnyMessage[] }) {
  return (
    <section className="messages" data-testid="messages">
      {props.messages.length === 0 && (
        <p className="empty">
          Say hello, ask for a story, or ask for an action such as “please book a table”.
        </p>
      )}
      {props.messages.map((message, index) => {
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
  );
}

// An interrupt: a human-in-the-loop request gets Approve/Reject (with an optional reason);
// any other value is shown as it is, with a free-text answer.
export function InterruptCard(props: {
  value: unknown;
  onDecide: (decision: Decision) => void;
  onAnswer: (text: string) => void;
}) {
  const { value, onDecide, onAnswer } = props;
  const [text, setText] = useState("");
  if (!isHITLRequest(value)) {
    const submit = (event: React.FormEvent) => {
      event.preventDefault();
      if (text.trim()) onAnswer(text.trim());
    };
    return (
      <form className="interrupt" data-testid="interrupt" onSubmit={submit}>
        <span className="question">{JSON.stringify(value)}</span>
        <input
          type="text"
          aria-label="Your answer"
          value={text}
          onChange={(e) => setText(e.target.value)}
        />
        <button className="primary" type="submit">
          Answer
        </button>
      </form>
    );
  }
  const request = value.action_requests[0];
  const allowed =
    value.review_configs.find((c) => c.action_name === request.name)?.allowed_decisions ?? [];
  const reject = () => {
    const reason = text.trim();
    onDecide(reason ? { type: "reject", message: reason } : { type: "reject" });
  };
  return (
    <div className="interrupt" data-testid="interrupt">
      <span className="question">{request.description ?? request.name}</span>
      <code className="action">
        {request.name}({JSON.stringify(request.args)})
      </code>
      <input
        type="text"
        aria-label="Reason"
        placeholder="Reason (optional, sent with a rejection)"
        value={text}
        onChange={(e) => setText(e.target.value)}
      />
      {allowed.includes("approve") && (
        <button className="primary" onClick={() => onDecide({ type: "approve" })}>
          Approve
        </button>
      )}
      {allowed.includes("reject") && (
        <button className="reject" onClick={reject}>
          Reject
        </button>
      )}
    </div>
  );
}

export function Header(props: { title: string; status: string; server: string }) {
  return (
    <header>
      <h1>{props.title}</h1>
      <span className="status" data-testid="status">
        {props.status}
      </span>
      <span className="server">{props.server}</span>
    </header>
  );
}

export function Composer(props: { disabled: boolean; onSend: (text: string) => void }) {
  const [draft, setDraft] = useState("");
  const send = (event: React.FormEvent) => {
    event.preventDefault();
    const text = draft.trim();
    if (!text || props.disabled) return;
    setDraft("");
    props.onSend(text);
  };
  return (
    <form className="composer" onSubmit={send}>
      <input
        type="text"
        aria-label="Message"
        placeholder="Type a message"
        value={draft}
        onChange={(e) => setDraft(e.target.value)}
      />
      <button className="primary" type="submit" disabled={props.disabled}>
        Send
      </button>
    </form>
  );
}

/** The open conversation: header, messages, the pending question, the last error, the composer. */
export function Conversation(props: {
  title: string;
  server: string;
  messages: AnyMessage[];
  question: unknown;
  busy: boolean;
  error: unknown;
  onDecide: (decision: Decision) => void;
  onAnswer: (text: string) => void;
  onSend: (text: string) => void;
}) {
  const { question, busy, error } = props;
  const status = busy ? "streaming…" : question != null ? "waiting for your answer" : "idle";
  return (
    <main>
      <Header title={props.title} status={status} server={props.server} />
      <Messages messages={props.messages} />
      {question != null && !busy && (
        <InterruptCard value={question} onDecide={props.onDecide} onAnswer={props.onAnswer} />
      )}
      {error != null && (
        <div className="error" data-testid="error">
          {String((error as Error).message ?? error)}
        </div>
      )}
      <Composer disabled={busy || question != null} onSend={props.onSend} />
    </main>
  );
}
