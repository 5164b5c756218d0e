// The Memory settings page: the raw block, a live count that agrees with
// the server, save with the compare-before-save rule (a change made
// elsewhere is shown as a line diff before it can be overwritten), Load
// server copy, Clear all, recent changes, and a check for outside changes
// whenever the page comes back into focus. A memory review's suggested
// update is proposal.js's, on the same editor.
import { call, errorMessage, el } from "./api.js";
import { charCount, LIMIT } from "./block.js";
import { initProposal } from "./proposal.js";

const box = document.getElementById("block");
const count = document.getElementById("count");
const status = document.getElementById("status");
const changes = document.getElementById("changes");
const saveButton = document.getElementById("save");
const loadButton = document.getElementById("load");
const clearDialog = document.getElementById("confirm-clear");

let startContent = "";   // the server's block when editing began
let startEtag = "";
let conflictEtag = null; // set after "changed elsewhere": the next Save overwrites
const conflictBox = document.getElementById("conflict");

const edited = () => box.value !== startContent;

function say(text, kind = "") {
  status.textContent = text;
  status.className = kind;
}

function updateCount() {
  const n = charCount(box.value);
  count.textContent = `${n.toLocaleString("en-US")} / ${LIMIT.toLocaleString("en-US")} characters`;
  count.classList.toggle("over", n > LIMIT);
}

function showLines(removed, added) {
  changes.replaceChildren();
  if (!removed.length && !added.length) { changes.hidden = true; return; }
  changes.append(el("h2", "", "What this save changed"));
  for (const line of removed) changes.append(el("div", "lines removed", `− ${line}`));
  for (const line of added) changes.append(el("div", "lines added", `+ ${line}`));
  changes.hidden = false;
}

function lines(text) { return text ? text.split("\n") : []; }

// The lines removed from ``a`` and added in ``b``, in order (a longest common
// subsequence of lines, as the server's diff finds for a block this size).
export function lineDiff(before, after) {
  const a = lines(before), b = lines(after);
  if (a.length * b.length > 4_000_000) {
    const inB = new Set(b), inA = new Set(a);
    return { removed: a.filter((l) => !inB.has(l)), added: b.filter((l) => !inA.has(l)) };
  }
  const n = a.length, m = b.length;
  const keep = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      keep[i][j] = a[i] === b[j] ? keep[i + 1][j + 1] + 1 : Math.max(keep[i + 1][j], keep[i][j + 1]);
    }
  }
  const removed = [], added = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) { i++; j++; }
    else if (j < m && (i === n || keep[i][j + 1] >= keep[i + 1][j])) added.push(b[j++]);
    else removed.push(a[i++]);
  }
  return { removed, added };
}

function hideConflict() {
  conflictEtag = null;
  conflictBox.hidden = true;
  loadButton.hidden = true;
  saveButton.textContent = "Save";
}

async function loadServerCopy() {
  const result = await call("GET", "/v1/memory");
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  startContent = result.data.block;
  startEtag = result.data.etag;
  box.value = startContent;
  hideConflict();
  updateCount();
}

async function loadAudit() {
  const list = document.getElementById("audit");
  const result = await call("GET", "/v1/memory/audit?limit=20");
  list.replaceChildren();
  if (!result.ok) return;
  list.hidden = !result.data.length;
  document.getElementById("audit-empty").hidden = Boolean(result.data.length);
  for (const entry of result.data) {
    const item = el("li");
    const who = entry.source === "review"
      ? "A memory review"
      : entry.writer === "user" ? "You" : "The assistant";
    const what = entry.operation === "delete"
      ? `cleared everything (${lineCount(entry.removed_count)})`
      : changed(entry.removed_count, entry.added_count);
    const at = new Date(entry.at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
    item.append(el("div", "meta", `${at} · ${who} ${what}`));
    for (const line of entry.removed_lines) item.append(el("div", "lines removed", `− ${line}`));
    for (const line of entry.added_lines) item.append(el("div", "lines added", `+ ${line}`));
    list.append(item);
  }
}

function lineCount(n) { return `${n.toLocaleString("en-US")} ${n === 1 ? "line" : "lines"}`; }

function changed(removed, added) {
  if (!removed && !added) return "changed nothing";
  if (!removed) return `added ${lineCount(added)}`;
  if (!added) return `removed ${lineCount(removed)}`;
  return `removed ${lineCount(removed)}, added ${lineCount(added)}`;
}

async function whoChanged() {
  const result = await call("GET", "/v1/memory/audit?limit=1");
  const last = result.ok ? result.data[0] : null;
  // the audit knows the writer, not the place: a person's save may come from
  // another tab, the memoro command or an app acting for them
  if (last?.writer === "model") return "the assistant";
  if (last?.writer === "user") return "you or an app acting for you (another tab, the memoro command)";
  return "someone else";
}

// The server's block is no longer the one editing began from: show what the
// other writer changed, keep the edits, and let the next Save overwrite.
async function conflict(serverBlock, serverEtag) {
  conflictEtag = serverEtag;
  showLines([], []);  // the last save's diff no longer describes the server's copy
  const diff = lineDiff(startContent, serverBlock);
  const shown = document.getElementById("conflict-lines");
  shown.replaceChildren();
  for (const line of diff.removed) shown.append(el("div", "lines removed", `− ${line}`));
  for (const line of diff.added) shown.append(el("div", "lines added", `+ ${line}`));
  if (!serverBlock) shown.append(el("div", "meta", "Everything was cleared."));
  document.getElementById("conflict-who").textContent = await whoChanged();
  conflictBox.hidden = false;
  loadButton.hidden = false;
  saveButton.textContent = "Save again";
  say("Memory was changed elsewhere. Your edits are kept: Save again to overwrite, or Load server copy to discard them.", "error");
  loadAudit();
}

async function save() {
  const text = box.value;
  if (charCount(text) === 0) {
    say("Nothing saved: the memory is empty. To delete everything, use Clear all.", "error");
    return;
  }
  let expected = startEtag;
  if (conflictEtag === null) {
    const server = await call("GET", "/v1/memory");
    if (!server.ok) { say(errorMessage(server), "error"); return; }
    if (server.data.block !== startContent) { await conflict(server.data.block, server.data.etag); return; }
  } else {
    expected = conflictEtag;
  }
  const result = await call("PUT", "/v1/memory", { block: text }, { "If-Match": `"${expected}"` });
  if (result.status === 412) { await conflict(result.data.error.current, result.data.error.etag); return; }
  if (result.status === 422 && result.data?.outcome) { say(refused(result.data), "error"); return; }
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  startContent = result.data.block;
  startEtag = result.data.etag;
  hideConflict();
  box.value = startContent;
  updateCount();
  showLines(result.data.removed, result.data.added);
  say(result.data.outcome === "unchanged" ? "No change: this is what was saved already." : "Saved.", "ok");
  loadAudit();
  proposal.saved();
}

// Why a save was refused, written for the person at the page (the server's
// warnings are written for the model, which rewrites the block itself).
function refused(answer) {
  if (answer.outcome === "empty") {
    return "Nothing saved: the memory is empty. To delete everything, use Clear all.";
  }
  const n = (x) => x.toLocaleString("en-US");
  return `Nothing saved: the memory would be ${n(answer.attempted_count)} characters and the`
    + ` limit is ${n(answer.limit)}. Shorten it by at least ${n(answer.over_by)}`
    + ` character${answer.over_by === 1 ? "" : "s"} and save again; your text is still here.`;
}

async function clearAll() {
  clearDialog.close();
  const result = await call("DELETE", "/v1/memory");
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  startContent = ""; startEtag = "";
  hideConflict();
  box.value = "";
  updateCount();
  showLines([], []);
  say("Memory cleared. Nothing is remembered about you now.", "ok");
  proposal.forget();
  await loadServerCopy();
  loadAudit();
  proposal.load();  // Clear all drops a suggested update too
}

// A suggested update was accepted: the server saved it through the same save.
async function accepted(result) {
  if (edited()) {  // the box holds the person's own edits: keep them, as for any outside change
    await conflict(result.block, result.etag);
    return;
  }
  startContent = result.block;
  startEtag = result.etag;
  hideConflict();
  box.value = startContent;
  updateCount();
  showLines(result.removed, result.added);
  say("Accepted: the suggested update is saved.", "ok");
  loadAudit();
}

function editText(text) {
  box.value = text;
  updateCount();
  showLines([], []);
  box.focus();
}

const proposal = initProposal({ edited, editText, accepted, say });

box.addEventListener("input", () => {
  updateCount();
  if (status.className === "ok") say("");  // "Saved." no longer describes the box
});
saveButton.addEventListener("click", save);
loadButton.addEventListener("click", async () => {
  proposal.forget();
  await loadServerCopy();
  showLines([], []);
  say("Loaded the server copy.");
  await loadAudit();
});
box.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); save(); }
});
window.addEventListener("beforeunload", (event) => {
  if (edited()) { event.preventDefault(); event.returnValue = ""; }
});

// Back to the page (another tab, the chat, a terminal): was the block changed
// meanwhile? Without edits, show the new block; with edits, say so at once.
let checking = false;
async function checkOutside() {
  if (checking || conflictEtag !== null) return;
  checking = true;
  try {
    const server = await call("GET", "/v1/memory");
    await proposal.load();  // a review may have suggested an update meanwhile
    if (!server.ok || server.data.block === startContent) return;
    if (!edited()) {
      await loadServerCopy();
      showLines([], []);
      say("Memory was changed elsewhere; this is the latest copy.");
      await loadAudit();
    } else {
      await conflict(server.data.block, server.data.etag);
    }
  } finally {
    checking = false;
  }
}
window.addEventListener("focus", checkOutside);
document.addEventListener("visibilitychange", () => { if (!document.hidden) checkOutside(); });
document.getElementById("clear").addEventListener("click", () => clearDialog.showModal());
document.getElementById("confirm-yes").addEventListener("click", clearAll);
document.getElementById("confirm-no").addEventListener("click", () => clearDialog.close());

await loadServerCopy();
await loadAudit();
await proposal.load();
document.body.dataset.ready = "true";
