// The Memory settings page (SPEC S1–S5): the raw block, a live count that
// agrees with the server, save with the compare-before-save rule, Load
// server copy, Clear all, and recent changes.
import { call, errorMessage, el } from "./api.js";
import { charCount, LIMIT } from "./block.js";

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

async function loadServerCopy() {
  const result = await call("GET", "/v1/memory");
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  startContent = result.data.block;
  startEtag = result.data.etag;
  conflictEtag = null;
  box.value = startContent;
  loadButton.hidden = true;
  updateCount();
}

async function loadAudit() {
  const list = document.getElementById("audit");
  const result = await call("GET", "/v1/memory/audit?limit=20");
  list.replaceChildren();
  if (!result.ok) return;
  if (!result.data.length) list.append(el("li", "meta", "No changes yet."));
  for (const entry of result.data) {
    const item = el("li");
    const who = entry.writer === "user" ? "You" : "The assistant";
    const what = entry.operation === "delete"
      ? `cleared everything (${entry.removed_count} lines)`
      : `removed ${entry.removed_count}, added ${entry.added_count} lines`;
    item.append(el("div", "meta", `${new Date(entry.at).toLocaleString()} · ${who} ${what}`));
    for (const line of entry.removed_lines) item.append(el("div", "lines removed", `− ${line}`));
    for (const line of entry.added_lines) item.append(el("div", "lines added", `+ ${line}`));
    list.append(item);
  }
}

function conflict(serverEtag) {
  conflictEtag = serverEtag;
  loadButton.hidden = false;
  say("Memory was changed elsewhere. Your edits are kept: Save again to overwrite, or Load server copy to discard them.", "error");
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
    if (server.data.block !== startContent) { conflict(server.data.etag); return; }
  } else {
    expected = conflictEtag;
  }
  const result = await call("PUT", "/v1/memory", { block: text }, { "If-Match": `"${expected}"` });
  if (result.status === 412) { conflict(result.data.error.etag); return; }
  if (result.status === 422 && result.data?.warnings) { say(result.data.warnings.join(" "), "error"); return; }
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  startContent = result.data.block;
  startEtag = result.data.etag;
  conflictEtag = null;
  loadButton.hidden = true;
  box.value = startContent;
  updateCount();
  showLines(result.data.removed, result.data.added);
  say(result.data.outcome === "unchanged" ? "No change: this is what was saved already." : "Saved.", "ok");
  loadAudit();
}

async function clearAll() {
  clearDialog.close();
  const result = await call("DELETE", "/v1/memory");
  if (!result.ok) { say(errorMessage(result), "error"); return; }
  startContent = ""; startEtag = ""; conflictEtag = null;
  box.value = "";
  loadButton.hidden = true;
  updateCount();
  showLines([], []);
  say("Memory cleared. Nothing is remembered about you now.", "ok");
  await loadServerCopy();
  loadAudit();
}

box.addEventListener("input", updateCount);
saveButton.addEventListener("click", save);
loadButton.addEventListener("click", async () => { await loadServerCopy(); say("Loaded the server copy."); });
document.getElementById("clear").addEventListener("click", () => clearDialog.showModal());
document.getElementById("confirm-yes").addEventListener("click", clearAll);
document.getElementById("confirm-no").addEventListener("click", () => clearDialog.close());

await loadServerCopy();
await loadAudit();
document.body.dataset.ready = "true";
