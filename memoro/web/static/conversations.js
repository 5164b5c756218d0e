// The Conversations page: a page of conversations at a time (Show more),
// search over past conversations, open one beside the list, delete; import.
import { call, csrf, errorMessage, el } from "./api.js";

const PAGE = 25;
const list = document.getElementById("list");
const hits = document.getElementById("hits");
const more = document.getElementById("more");
const countLine = document.getElementById("count-line");
const status = document.getElementById("status");
const section = document.getElementById("turns");
const dialog = document.getElementById("confirm-delete");
const searchBox = document.getElementById("search");
const clearSearch = document.getElementById("search-clear");
let pending = null;
let shown = 0;          // conversations listed so far
let total = 0;          // conversations there are
let openId = null;      // the conversation open beside the list
const titles = new Map();

function say(text, kind = "") { status.textContent = text; status.className = kind; }

function plural(n, word) { return `${n.toLocaleString()} ${word}${n === 1 ? "" : "s"}`; }

function nameOf(id) { return titles.get(id) || id; }

function day(iso) { return new Date(iso).toLocaleDateString(); }

async function open(id, turnId = null) {
  const result = await call("GET", `/v1/conversations/${encodeURIComponent(id)}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  openId = id;
  const title = document.getElementById("turns-title");
  title.textContent = nameOf(id);
  const turns = result.data;
  document.getElementById("turns-meta").textContent = turns.length
    ? `${plural(turns.length, "turn")} · ${day(turns[0].at)} to ${day(turns[turns.length - 1].at)}`
    : "";
  const items = document.getElementById("turn-list");
  items.replaceChildren();
  let target = null;
  for (const turn of turns) {
    const item = el("li");
    item.dataset.turnId = turn.id;
    item.append(el("div", "meta", new Date(turn.at).toLocaleString()));
    if (turn.question) item.append(el("div", "turn-text", `You: ${turn.question}`));
    if (turn.answer) item.append(el("div", "turn-text", `Assistant: ${turn.answer}`));
    if (turn.id === turnId) { item.classList.add("found"); target = item; }
    items.append(item);
  }
  for (const row of list.querySelectorAll("li[data-id]")) row.classList.toggle("open", row.dataset.id === id);
  section.hidden = false;
  // the panel sits beside the list on a wide screen, below it on a narrow one:
  // bring it (or the turn that was found) into view either way
  title.focus({ preventScroll: true });
  (target || section).scrollIntoView({ block: target ? "center" : "start" });
}

function closePanel() {
  section.hidden = true;
  document.getElementById("turn-list").replaceChildren();
  const row = openId === null ? null : list.querySelector(`li[data-id="${CSS.escape(openId)}"]`);
  openId = null;
  for (const other of list.querySelectorAll("li.open")) other.classList.remove("open");
  if (row) { row.scrollIntoView({ block: "nearest" }); row.querySelector("button")?.focus(); }
}

function row(conversation) {
  // its title where it has one (imports), else its first line, else its id
  const name = conversation.title || conversation.preview || conversation.id;
  titles.set(conversation.id, name);
  const item = el("li");
  item.dataset.id = conversation.id;
  const text = el("div", "name");
  text.append(el("div", "title", name));
  if (conversation.title && conversation.preview && conversation.preview !== conversation.title) {
    text.append(el("div", "preview", conversation.preview));
  }
  const meta = `${plural(conversation.turns, "turn")} · ${day(conversation.last_at)}`;
  const named = conversation.title || name === conversation.id;
  text.append(el("div", "meta", named ? meta : `${conversation.id} · ${meta}`));
  const openButton = el("button", "", "Open");
  openButton.setAttribute("aria-label", `Open ${name}`);
  openButton.addEventListener("click", () => open(conversation.id));
  const deleteButton = el("button", "danger", "Delete");
  deleteButton.setAttribute("aria-label", `Delete ${name}`);
  deleteButton.addEventListener("click", () => {
    pending = conversation.id;
    document.getElementById("delete-what").textContent =
      `"${name}" will be removed from search at once. This cannot be undone.`;
    dialog.showModal();
  });
  item.append(text, openButton, deleteButton);
  return item;
}

async function showPage(reset) {
  if (reset) { shown = 0; list.replaceChildren(); }
  // one more than a page, to know whether there are more
  const result = await call("GET", `/v1/conversations?limit=${PAGE + 1}&offset=${shown}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  const page = result.data.slice(0, PAGE);
  if (!shown && !page.length) list.append(el("li", "meta", "No conversations yet."));
  for (const conversation of page) list.append(row(conversation));
  shown += page.length;
  more.hidden = result.data.length <= PAGE;
  total = Number(result.headers.get("X-Total-Count") ?? shown);
  tellCount();
}

function tellCount() {
  countLine.textContent = !shown ? ""
    : more.hidden ? `${plural(shown, "conversation")}, latest first.`
    : `The latest ${shown.toLocaleString()} of ${plural(total, "conversation")}.`;
}

async function refresh() {
  await showPage(true);
}

async function search(query) {
  const result = await call("GET", `/v1/search?limit=20&q=${encodeURIComponent(query)}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  hits.replaceChildren();
  list.hidden = true;
  more.hidden = true;
  hits.hidden = false;
  clearSearch.hidden = false;
  countLine.textContent = result.data.hits.length
    ? `${plural(result.data.hits.length, "past turn")} matching “${query}”, best first.`
    : `Nothing in past conversations matches “${query}”.`;
  for (const hit of result.data.hits) {
    const item = el("li");
    item.dataset.conversation = hit.conversation;
    const head = el("div", "meta", `${nameOf(hit.conversation)} · ${new Date(hit.at).toLocaleString()}`);
    const text = el("div", "turn-text hit-text", hit.text);
    const openButton = el("button", "", "Open");
    openButton.setAttribute("aria-label", `Open ${nameOf(hit.conversation)} at this turn`);
    openButton.addEventListener("click", () => open(hit.conversation, hit.turn_id));
    item.append(head, text, openButton);
    hits.append(item);
  }
  for (const warning of result.data.warnings) say(warning);
}

function showAll() {
  searchBox.value = "";
  hits.hidden = true;
  hits.replaceChildren();
  list.hidden = false;
  clearSearch.hidden = true;
  refresh();
}

document.getElementById("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const query = searchBox.value.trim();
  if (query) search(query); else showAll();
});
clearSearch.addEventListener("click", showAll);
more.addEventListener("click", () => showPage(false));
document.getElementById("turns-close").addEventListener("click", closePanel);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && !section.hidden && !dialog.open) closePanel();
});

document.getElementById("delete-yes").addEventListener("click", async () => {
  dialog.close();
  const result = await call("DELETE", `/v1/conversations/${encodeURIComponent(pending)}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  say(`Deleted "${nameOf(pending)}".`, "ok");
  if (openId === pending) { section.hidden = true; openId = null; }
  list.querySelector(`li[data-id="${CSS.escape(pending)}"]`)?.remove();
  for (const hit of hits.querySelectorAll(`li[data-conversation="${CSS.escape(pending)}"]`)) hit.remove();
  shown = Math.max(0, shown - 1);
  total = Math.max(0, total - 1);
  if (!shown) await showPage(true);  // the next ones, or "No conversations yet."
  else tellCount();
});
document.getElementById("delete-no").addEventListener("click", () => dialog.close());

// -- import ---------------------------------------------------------------------

const form = document.getElementById("import-form");
const bar = document.getElementById("import-progress");
const importStatus = document.getElementById("import-status");
const report = document.getElementById("import-report");

function tell(text, kind = "") { importStatus.textContent = text; importStatus.className = kind; }

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
