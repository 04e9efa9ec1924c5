// The generative UI page: `useStream` from @langchain/langgraph-sdk/react (the hook Agent
// Chat UI uses) and `LoadExternalComponent` from @langchain/langgraph-sdk/react-ui, which
// renders the components a graph pushes with `push_ui_message` under the message they belong
// to. The component's code comes from the server: POST /ui/{assistant} answers the tags that
// load /ui/{assistant}/entrypoint.js (and .css) into a shadow root.
//
// Those tags name the assets by path, as LangGraph's server answers them, so the page's own
// origin must serve /ui/ from the server (`npm run serve -- --api URL` forwards it), unless
// the page is served by the server's origin.
//
// Query parameters: apiUrl (default the `runyard dev` URL), assistant (default "agent"),
// thread (the open conversation, kept in the URL so that a reload reopens it).
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";
import {
  LoadExternalComponent,
  type UIMessage,
  uiMessageReducer,
} from "@langchain/langgraph-sdk/react-ui";
import { StrictMode, useCallback, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  type AnyMessage,
  Composer,
  DEFAULT_API_URL,
  Header,
  param,
  roleOf,
  setThreadParam,
  textOf,
} from "./shared";

type GenUiState = { messages: AnyMessage[]; ui?: UIMessage[] };

function Chat() {
  const apiUrl = param("apiUrl") ?? DEFAULT_API_URL;
  const assistantId = param("assistant") ?? "agent";
  const [threadId, setThreadId] = useState<string | null>(param("thread"));
  const client = useMemo(() => new Client({ apiUrl }), [apiUrl]);
  const onThreadId = useCallback((id: string | null) => {
    setThreadId(id);
    setThreadParam(id);
  }, []);

  const stream = useStream<GenUiState>({
    client,
    assistantId,
    threadId,
    onThreadId,
    reconnectOnMount: true,
    // The component shows up as soon as the graph pushes it (a `custom` event), before
    // the next `values` snapshot brings the thread's `ui` list.
    onCustomEvent: (event, options) => {
      options.mutate((prev) => ({
        ...prev,
        ui: uiMessageReducer(prev.ui ?? [], event as UIMessage),
      }));
    },
  });

  const send = (text: string) => {
    const message = { type: "human", content: text };
    stream.submit(
      { messages: [message] },
      {
        streamMode: ["values", "custom"],
        optimisticValues: (prev: Partial<GenUiState>) => ({
          ...prev,
          messages: [...(prev.messages ?? []), message],
        }),
      },
    );
  };

  const ui = stream.values.ui ?? [];
  return (
    <div className="app">
      <main>
        <Header
          title="Runyard generative UI"
          status={stream.isLoading ? "streaming…" : "idle"}
          server={`${assistantId} @ ${apiUrl}`}
        />
        <section className="messages" data-testid="messages">
          {(stream.messages as AnyMessage[]).map((message, index) => (
            <div
              key={message.id ?? index}
              className={`message ${roleOf(message) === "human" ? "human" : "ai"}`}
              data-role={roleOf(message)}
            >
              {textOf(message.content)}
              {ui
                .filter((item) => item.metadata?.message_id === message.id)
                .map((item) => (
                  <LoadExternalComponent
                    key={item.id}
                    stream={stream}
                    message={item}
                    fallback={<span className="loading">loading {item.name}…</span>}
                  />
                ))}
            </div>
          ))}
        </section>
        {stream.error != null && (
          <div className="error" data-testid="error">
            {String((stream.error as Error).message ?? stream.error)}
          </div>
        )}
        <Composer disabled={stream.isLoading} onSend={send} />
      </main>
    </div>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Chat />
  </StrictMode>,
);
