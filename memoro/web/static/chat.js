// The Chat page: talk to the configured model and watch the memory block
// change as the assistant writes it.
import { call, errorMessage, el } from "./api.js";
import { charCount, LIMIT } from "./block.js";

const transcript = document.getElementById("transcript");
const message = document.getElementById("message");
const status = document.getElementById("status");
let conversation = null;

function say(text, kind = "") { status.textContent = text; status.className = kind; }

function add(who, text, kind = "") {
  const item = el("li", kind);
  item.append(el("div", "meta", who), el("div", "turn-text", text));
  transcript.append(item);
}

async function showMemory() {
  const result = await call("GET", "/v1/memory");
  if (!result.ok) return;
  document.getElementById("memory").textContent = result.data.block || "(nothing remembered)";
  document.getElementById("memory-count").textContent =
    `${charCount(result.data.block).toLocaleString("en-US")} / ${LIMIT.toLocaleString("en-US")} characters`;
}

document.getElementById("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = message.value.trim();
  if (!text) return;
  add("You", text);
  message.value = "";
  say("The assistant is answering…");
  const result = await call("POST", "/v1/chat", { message: text, conversation });
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  conversation = result.data.conversation;
  for (const tool of result.data.tools) {
    if (tool.name === "memory_write" || tool.name === "memory_delete_all") {
      const lines = tool.result.split("\n").filter((l) => l.startsWith("- ") || l.startsWith("+ "));
      add("Memory written", lines.join("\n") || tool.result.split("\n")[0], "tool");
    } else {
      add(`Tool: ${tool.name}`, tool.result.split("\n")[0], "tool");
    }
  }
  add("Assistant", result.data.answer);
  say("");
  await showMemory();
});

document.getElementById("new").addEventListener("click", () => {
  conversation = null;
  transcript.replaceChildren();
  say("New conversation.");
});

await showMemory();
document.body.dataset.ready = "true";
