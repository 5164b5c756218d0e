// The Chat page: talk to the configured model, see its answer as it is
// written, and watch the memory block change as the assistant writes it.
import { csrf, errorMessage, call, el } from "./api.js";
import { charCount, LIMIT } from "./block.js";
import { render } from "./markdown.js";

const transcript = document.getElementById("transcript");
const message = document.getElementById("message");
const status = document.getElementById("status");
const form = document.getElementById("composer");
const sendButton = document.getElementById("send");
let conversation = null;
let busy = false;

function say(text, kind = "") { status.textContent = text; status.className = kind; }

function add(who, text, kind = "") {
  const item = el("li", kind);
  const body = el("div", "turn-text", text);
  item.append(el("div", "meta", who), body);
  transcript.append(item);
  item.scrollIntoView({ block: "nearest" });
  return body;
}

// The assistant's words, as Markdown made safe (markdown.js): never HTML.
function addAnswer(text, kind) {
  const body = add("Assistant", "", kind);
  body.className = "answer";
  show(body, text);
  return body;
}

function show(body, text) {
  body.dataset.text = text;
  body.replaceChildren(render(text));
}

// A tool call, labelled by what it did; its details (the lines a write
// removed and added, the turns a search found) are there to unfold.
function addTool(tool) {
  const item = el("li", tool.is_error ? "tool error" : "tool");
  if (tool.name === "memory_write") {
    item.append(el("div", "meta", tool.label));
    const lines = tool.result.split("\n").filter((l) => l.startsWith("- ") || l.startsWith("+ "));
    if (lines.length) item.append(el("div", "turn-text lines", lines.join("\n")));
  } else if (tool.name === "conversation_search" && !tool.is_error) {
    const details = el("details");
    details.append(el("summary", "meta", tool.label));
    details.append(el("div", "turn-text", tool.result.split("\n").slice(1).join("\n").trim()));
    item.append(details);
  } else {
    item.append(el("div", "meta", tool.label));
  }
  transcript.append(item);
}

async function showMemory() {
  const result = await call("GET", "/v1/memory");
  if (!result.ok) return;
  document.getElementById("memory").textContent = result.data.block || "(nothing remembered)";
  document.getElementById("memory-count").textContent =
    `${charCount(result.data.block).toLocaleString("en-US")} / ${LIMIT.toLocaleString("en-US")} characters`;
}

// Server-sent events from POST /v1/chat with stream: true.
async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message", data = "";
      for (const line of raw.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      yield { name, data: data ? JSON.parse(data) : null };
    }
  }
}

async function send(text) {
  busy = true;
  sendButton.disabled = true;
  add("You", text);
  say("The assistant is answering…");
  let answer = null;   // the assistant's bubble, made when its first words arrive
  let item = null;
  try {
    const response = await fetch("/v1/chat", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ message: text, conversation, stream: true }),
    });
    if (!response.ok) {
      const body = await response.text();
      let data = null;
      try { data = JSON.parse(body); } catch { data = null; }
      say(errorMessage({ status: response.status, data }), "error");
      return;
    }
    for await (const event of events(response)) {
      if (event.name === "text") {
        if (answer === null) {
          answer = addAnswer("", "assistant streaming");
          item = answer.parentElement;
        }
        show(answer, answer.dataset.text + event.data.text);
      } else if (event.name === "tool") {
        addTool(event.data);
        answer = null;  // words after a tool call start a new bubble
        if (item) item.classList.remove("streaming");
        if (event.data.name.startsWith("memory_")) showMemory();
      } else if (event.name === "done") {
        conversation = event.data.conversation;
        if (item) item.classList.remove("streaming");
        if (!item && event.data.answer) addAnswer(event.data.answer, "assistant");
        if (event.data.stopped) say("The assistant stopped after too many tool calls in a row.", "error");
        else say("");
      } else if (event.name === "error") {
        if (item) item.classList.remove("streaming");
        const { code, message } = event.data.error;
        // the model failed; else memoro refused the turn (its user was erased…) and says why
        say(code.startsWith("model_") ? `The model could not answer: ${message}` : message, "error");
      }
    }
  } catch (error) {
    say(`The answer did not arrive: ${error.message}`, "error");
  } finally {
    busy = false;
    sendButton.disabled = false;
    await showMemory();
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = message.value.trim();
  if (!text || busy) return;
  message.value = "";
  await send(text);
  message.focus();
});

// Enter sends; Shift+Enter starts a new line (and Enter while an input
// method is composing a character is left to it).
message.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    form.requestSubmit();
  }
});

document.getElementById("new").addEventListener("click", () => {
  conversation = null;
  transcript.replaceChildren();
  say("New conversation.");
  message.focus();
});

await showMemory();
document.body.dataset.ready = "true";
