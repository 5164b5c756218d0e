// The Conversations page: list, open, delete; import an export.
import { call, csrf, errorMessage, el } from "./api.js";

const list = document.getElementById("list");
const status = document.getElementById("status");
const section = document.getElementById("turns");
const dialog = document.getElementById("confirm-delete");
let pending = null;
const titles = new Map();

function say(text, kind = "") { status.textContent = text; status.className = kind; }

async function open(id) {
  const result = await call("GET", `/v1/conversations/${encodeURIComponent(id)}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  document.getElementById("turns-title").textContent = `Conversation ${titles.get(id) || id}`;
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
    titles.set(conversation.id, conversation.title);
    const item = el("li");
    item.dataset.id = conversation.id;
    item.append(el("span", "name", conversation.title || conversation.id));
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

// -- import ---------------------------------------------------------------------

const form = document.getElementById("import-form");
const bar = document.getElementById("import-progress");
const importStatus = document.getElementById("import-status");
const report = document.getElementById("import-report");

function tell(text, kind = "") { importStatus.textContent = text; importStatus.className = kind; }

function plural(n, word) { return `${n.toLocaleString()} ${word}${n === 1 ? "" : "s"}`; }

function upload(data) {
  // XMLHttpRequest, not fetch: it reports how much of a large file has been sent
  return new Promise((resolve) => {
    const request = new XMLHttpRequest();
    request.open("POST", "/v1/imports");
    request.setRequestHeader("X-CSRF-Token", csrf);
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) { bar.max = event.total; bar.value = event.loaded; }
    });
    request.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(request.responseText); } catch { body = null; }
      resolve({ status: request.status, ok: request.status === 202, data: body });
    });
    request.addEventListener("error", () => resolve({ status: 0, ok: false, data: null }));
    request.send(data);
  });
}

function showReport(done) {
  const r = done.report;
  tell(`Imported ${plural(r.imported, "new turn")} from ${plural(r.conversations, "conversation")}`
       + ` (${r.already_there.toLocaleString()} already there).`, "ok");
  const lines = [];
  const skipped = Object.entries(r.skipped);
  if (skipped.length) lines.push("Left out (not dialogue): " + skipped.map(([why, n]) => `${why} (${n})`).join(", ") + ".");
  const unknown = Object.entries(r.unknown_types);
  if (unknown.length) lines.push("Left out (unknown content): " + unknown.map(([kind, n]) => `${kind} (${n})`).join(", ") + ".");
  if (r.failed) lines.push(`Could not import ${plural(r.failed, "turn or conversation")}: ` + r.problems.join("; "));
  if (r.block) lines.push(`Memory block: ${r.block}.`);
  report.replaceChildren(...lines.map((line) => el("li", "", line)));
}

async function follow(id) {
  for (;;) {
    const result = await call("GET", `/v1/imports/${encodeURIComponent(id)}`);
    if (!result.ok) { tell(errorMessage(result), "error"); return; }
    const state = result.data;
    if (state.status === "done") { bar.hidden = true; showReport(state); await refresh(); return; }
    if (state.status === "failed") { bar.hidden = true; tell(`The import failed: ${state.error}`, "error"); return; }
    bar.max = Math.max(state.size, 1);
    bar.value = state.read_bytes;
    tell(state.status === "queued" ? "Waiting for a worker to start the import…"
         : `Reading ${state.file_name}: ${Math.round(100 * state.read_bytes / Math.max(state.size, 1))}%`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const file = document.getElementById("import-file").files[0];
  if (!file) { tell("Choose the export file first.", "error"); return; }
  const button = document.getElementById("import-start");
  button.disabled = true;
  report.replaceChildren();
  bar.hidden = false;
  bar.value = 0;
  tell(`Uploading ${file.name}…`);
  const data = new FormData();
  data.append("format", document.getElementById("import-format").value);
  data.append("file", file);
  const result = await upload(data);
  if (!result.ok) {
    bar.hidden = true;
    tell(result.status ? errorMessage(result) : "The upload did not reach memoro.", "error");
  } else {
    await follow(result.data.id);
  }
  button.disabled = false;
});

await refresh();
document.body.dataset.ready = "true";
