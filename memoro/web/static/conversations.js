// The Conversations page: list, open, delete (SPEC C6).
import { call, errorMessage, el } from "./api.js";

const list = document.getElementById("list");
const status = document.getElementById("status");
const section = document.getElementById("turns");
const dialog = document.getElementById("confirm-delete");
let pending = null;

function say(text, kind = "") { status.textContent = text; status.className = kind; }

async function open(id) {
  const result = await call("GET", `/v1/conversations/${encodeURIComponent(id)}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  document.getElementById("turns-title").textContent = `Conversation ${id}`;
  const turns = document.getElementById("turn-list");
  turns.replaceChildren();
  for (const turn of result.data) {
    const item = el("li");
    item.append(el("div", "meta", new Date(turn.at).toLocaleString()));
    item.append(el("div", "turn-text", `You: ${turn.question}`));
    item.append(el("div", "turn-text", `Assistant: ${turn.answer}`));
    turns.append(item);
  }
  section.hidden = false;
}

async function refresh() {
  const result = await call("GET", "/v1/conversations");
  list.replaceChildren();
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  if (!result.data.length) list.append(el("li", "meta", "No conversations yet."));
  for (const conversation of result.data) {
    const item = el("li");
    item.dataset.id = conversation.id;
    item.append(el("span", "name", conversation.id));
    item.append(el("span", "meta", `${conversation.turns} turns · ${new Date(conversation.last_at).toLocaleDateString()}`));
    const openButton = el("button", "", "Open");
    openButton.addEventListener("click", () => open(conversation.id));
    const deleteButton = el("button", "danger", "Delete");
    deleteButton.addEventListener("click", () => {
      pending = conversation.id;
      document.getElementById("delete-what").textContent = `"${conversation.id}" will be removed from search at once. This cannot be undone.`;
      dialog.showModal();
    });
    item.append(openButton, deleteButton);
    list.append(item);
  }
}

document.getElementById("delete-yes").addEventListener("click", async () => {
  dialog.close();
  const result = await call("DELETE", `/v1/conversations/${encodeURIComponent(pending)}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  say(`Deleted "${pending}".`, "ok");
  section.hidden = true;
  await refresh();
});
document.getElementById("delete-no").addEventListener("click", () => dialog.close());

await refresh();
document.body.dataset.ready = "true";
