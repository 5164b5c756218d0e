// "Delete all my data" on the Memory page: after asking once more, erases
// everything memoro holds for the signed-in user (DELETE /v1/me) and says
// what there was.
import { call, errorMessage, el } from "./api.js";

const dialog = document.getElementById("confirm-erase");
const status = document.getElementById("erase-status");

function count(n, one, many) { return `${n.toLocaleString("en-US")} ${n === 1 ? one : many}`; }

export function described(deleted) {
  const parts = [];
  if (deleted.block) parts.push("your memory");
  if (deleted.audit_entries) parts.push(count(deleted.audit_entries, "change in its history", "changes in its history"));
  if (deleted.conversations) {
    parts.push(`${count(deleted.conversations, "conversation", "conversations")} (${count(deleted.turns, "turn", "turns")})`);
  }
  if (deleted.imports) parts.push(count(deleted.imports, "import", "imports"));
  if (!parts.length) return "memoro held nothing about you, so nothing was deleted.";
  const listed = parts.length > 1 ? `${parts.slice(0, -1).join(", ")} and ${parts.at(-1)}` : parts[0];
  return `Deleted ${listed}. memoro holds nothing about you now.`;
}

async function erase() {
  dialog.close();
  const result = await call("DELETE", "/v1/me");
  if (!result.ok) {
    status.className = "error";
    status.textContent = errorMessage(result);
    return;
  }
  const again = el("a", "", "Start again");
  again.href = "/memory";
  const main = document.querySelector("main");
  main.replaceChildren(el("h1", "", "All your data was deleted"), el("p", "", described(result.data)), again);
  main.dataset.erased = "true";
}

document.getElementById("erase").addEventListener("click", () => dialog.showModal());
document.getElementById("erase-yes").addEventListener("click", erase);
document.getElementById("erase-no").addEventListener("click", () => dialog.close());
