// The Conversations page: a page of conversations at a time (Show more),
// search over past conversations, open one beside the list (its title or
// Open), delete; import.
import { call, csrf, errorMessage, el } from "./api.js";
import { render } from "./markdown.js";

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

// Every conversation's name, once, for the search results: a hit may be in
// a conversation further down than the pages listed so far.
let allNamed = null;
function nameAll() {
  allNamed ??= call("GET", "/v1/conversations").then((result) => {
    if (!result.ok) { allNamed = null; return; }
    for (const c of result.data) titles.set(c.id, c.title || c.preview || c.id);
  });
  return allNamed;
}

// The words of ``query`` as one pattern that finds them at a word's start.
function wordsOf(query) {
  const words = [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) || [])];
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return escaped.length
    ? new RegExp(`(?<![\\p{L}\\p{N}])(?:${escaped.join("|")})[\\p{L}\\p{N}]*`, "giu") : null;
}

// ``text`` without its first line when that line is ``name`` (a conversation
// without a title is named by its first question, which the hit's heading
// already shows), else as it is.
function withoutName(text, name) {
  const first = text.split("\n", 1)[0].trim();
  const cut = name.endsWith("…") ? name.slice(0, -1) : null;  // a long first line, shortened
  if (first !== name && !(cut && first.startsWith(cut))) return text;
  const newline = text.indexOf("\n");
  const rest = newline < 0 ? "" : text.slice(newline + 1).trim();
  return rest || text;
}

// The words found by ``pattern`` in the text under ``root`` marked; text
// nodes are split, never markup parsed.
function mark(root, pattern) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const text = node.data;
    const parts = [];
    let at = 0;
    for (const found of text.matchAll(pattern)) {
      if (found.index > at) parts.push(text.slice(at, found.index));
      parts.push(el("mark", "", found[0]));
      at = found.index + found[0].length;
    }
    if (!parts.length) continue;
    parts.push(text.slice(at));
    node.replaceWith(...parts);
  }
  return root;
}

// A hit's text around its first match, cut at spaces (never inside a word),
// read as the opened conversation reads it (the same safe Markdown: HTML in
// it stays text), with the query's words marked.
const AROUND = 160, SNIPPET = 480;
export function snippet(text, query) {
  const pattern = wordsOf(query);
  let start = 0, end = text.length;
  if (text.length > SNIPPET) {
    const first = Math.max(pattern ? text.search(pattern) : 0, 0);
    start = Math.max(0, first - AROUND);
    while (start > 0 && start < first && !/\s/.test(text[start - 1])) start++; // to a word's start
    end = Math.min(text.length, start + SNIPPET);
    let cut = end;
    while (cut > first && cut < text.length && !/\s/.test(text[cut])) cut--; // to a word's end
    if (cut > first) end = cut;
  }
  const shown = (start > 0 ? "… " : "") + text.slice(start, end) + (end < text.length ? " …" : "");
  const out = render(shown);
  return pattern ? mark(out, pattern) : out;
}

function day(iso) { return new Date(iso).toLocaleDateString(undefined, { dateStyle: "medium" }); }

function moment(iso) {
  return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

// "12 Apr 2026", or "12 Apr 2026 to 14 Apr 2026" when it spans days.
function span(first, last) {
  const [a, b] = [day(first), day(last)];
  return a === b ? a : `${a} to ${b}`;
}

// A conversation's name that opens it when clicked, as its Open button does
// (the button stays the one control for the keyboard and screen readers).
function opener(name, action) {
  const title = el("span", "title opens", name);
  title.addEventListener("click", action);
  return title;
}

async function open(id, turnId = null) {
  say("");
  const result = await call("GET", `/v1/conversations/${encodeURIComponent(id)}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  openId = id;
  const title = document.getElementById("turns-title");
  title.textContent = nameOf(id);
  const turns = result.data;
  document.getElementById("turns-meta").textContent = turns.length
    ? `${plural(turns.length, "turn")} · ${span(turns[0].at, turns[turns.length - 1].at)}`
    : "";
  const items = document.getElementById("turn-list");
  items.replaceChildren();
  let target = null;
  for (const turn of turns) {
    const item = el("li");
    item.dataset.turnId = turn.id;
    item.append(el("div", "meta", moment(turn.at)));
    if (turn.question) item.append(el("div", "turn-text", `You: ${turn.question}`));
    if (turn.answer) {
      // the assistant's words, as on the Chat page: Markdown made safe, never HTML
      const answer = el("div", "answer");
      answer.append(render(turn.answer));
      item.append(el("div", "who", "Assistant:"), answer);
    }
    if (turn.id === turnId) { item.classList.add("found"); target = item; }
    items.append(item);
  }
  for (const row of list.querySelectorAll("li[data-id]")) row.classList.toggle("open", row.dataset.id === id);
  section.hidden = false;
  title.focus({ preventScroll: true });
  reveal(target);
}

// Bring the opened conversation (and the turn that was found) into view.
// Below the list (a narrow screen) the page scrolls to it. Beside the list
// the panel scrolls on its own; the page moves only when the panel's heading
// is out of sight, so nothing is pushed under the navigation for nothing.
function reveal(target) {
  if (getComputedStyle(section).position !== "sticky") {
    (target || section).scrollIntoView({ block: target ? "center" : "start" });
    return;
  }
  const head = section.querySelector(".row");
  const top = head.getBoundingClientRect().top;
  if (top < document.querySelector("header").getBoundingClientRect().bottom || top > innerHeight / 2) {
    section.scrollIntoView({ block: "start" });
  }
  section.scrollTop = target ? Math.max(0, target.offsetTop - head.offsetHeight - 8) : 0;
  if (target && target.getBoundingClientRect().top > innerHeight - 64) {
    target.scrollIntoView({ block: "nearest" });
  }
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
  text.append(opener(name, () => open(conversation.id)));
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
  const buttons = el("span", "buttons");
  buttons.append(openButton, deleteButton);
  item.append(text, buttons);
  return item;
}

async function showPage(reset) {
  if (reset) { shown = 0; list.replaceChildren(); }
  // one more than a page, to know whether there are more
  const result = await call("GET", `/v1/conversations?limit=${PAGE + 1}&offset=${shown}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  const page = result.data.slice(0, PAGE);
  if (!shown && !page.length) list.append(el("li", "meta",
    "No conversations yet. They appear here as the assistant records them; you can also import your history below."));
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
  say("");
  const result = await call("GET", `/v1/search?limit=20&q=${encodeURIComponent(query)}`);
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  if (result.data.hits.some((hit) => !titles.has(hit.conversation))) await nameAll();
  hits.replaceChildren();
  list.hidden = true;
  more.hidden = true;
  hits.hidden = false;
  clearSearch.hidden = false;
  countLine.textContent = result.data.hits.length
    ? `${plural(result.data.hits.length, "past turn")} matching “${query}”, best first.`
    : `No past conversation matches “${query}”: nothing said before is close enough to it.`;
  for (const hit of result.data.hits) {
    const item = el("li");
    item.dataset.conversation = hit.conversation;
    const name = nameOf(hit.conversation);
    const show = () => open(hit.conversation, hit.turn_id);
    const head = el("div", "hit-head");
    const label = el("div", "name");
    label.append(opener(name, show), el("div", "meta", moment(hit.at)));
    const openButton = el("button", "", "Open");
    openButton.setAttribute("aria-label", `Open ${name} at this turn`);
    openButton.addEventListener("click", show);
    head.append(label, openButton);
    const text = el("div", "answer hit-text");
    text.append(snippet(withoutName(hit.text, name), query));
    item.append(head, text);
    hits.append(item);
  }
  for (const warning of result.data.warnings) say(warning);
}

function showAll() {
  say("");
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
more.addEventListener("click", () => { say(""); showPage(false); });
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
  if (r.imported) lines.push("The imported conversations are in the list above by the date of their last message.");
  report.replaceChildren(...lines.map((line) => el("li", "", line)));
}

async function follow(id) {
  for (;;) {
    const result = await call("GET", `/v1/imports/${encodeURIComponent(id)}`);
    if (!result.ok) { tell(errorMessage(result), "error"); return; }
    const state = result.data;
    if (state.status === "done") {
      bar.hidden = true;
      showReport(state);
      allNamed = null;
      await refresh();
      // the list above has just grown: keep the report where the person is looking
      importStatus.scrollIntoView({ block: "nearest" });
      return;
    }
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
  say("");
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
