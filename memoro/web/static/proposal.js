// The Memory page's suggested update: a memory review's proposal, shown as
// the lines it removes (−) and adds (+), with Accept (the server saves it
// only if the memory is still the one it was made from), Edit (into the
// editor, to save as your own), Dismiss, and — once the memory has changed
// since — a fresh review instead of saving over the change.
import { call, errorMessage, el } from "./api.js";

const n = (x) => x.toLocaleString("en-US");
const plural = (count, word) => `${n(count)} ${word}${count === 1 ? "" : "s"}`;

function about(proposal) {
  const read = proposal.turns_read
    ? ` and ${plural(proposal.turns_read, "turn")} of your recent conversations`
    : "";
  const unread = proposal.turns_unread
    ? ` (${plural(proposal.turns_unread, "older turn")} did not fit in one review)`
    : "";
  return `The assistant reread this memory${read}${unread} and suggests these changes`
    + ` (${n(proposal.count)} / ${n(proposal.limit)} characters after them).`
    + " Nothing changes until you accept.";
}

// ``editor`` is the Memory page's own editing (memory.js): whether the box
// has unsaved edits, putting text into it, what to do once a suggestion is
// saved, and its status line.
export function initProposal(editor) {
  const section = document.getElementById("proposal");
  const shownLines = document.getElementById("proposal-lines");
  const staleNote = document.getElementById("proposal-stale");
  const status = document.getElementById("proposal-status");
  const buttons = {
    accept: document.getElementById("proposal-accept"),
    edit: document.getElementById("proposal-edit"),
    fresh: document.getElementById("proposal-fresh"),
    dismiss: document.getElementById("proposal-dismiss"),
  };
  let shown = null;    // the proposal on the page
  let editing = null;  // the proposal put into the editor: used up once the editor saves

  function tell(text, kind = "") {
    status.textContent = text;
    status.className = kind;
  }

  function show(proposal) {
    shown = proposal;
    if (!proposal) { section.hidden = true; tell(""); return; }
    document.getElementById("proposal-about").textContent = about(proposal);
    shownLines.replaceChildren();
    for (const line of proposal.removed) shownLines.append(el("div", "lines removed", `− ${line}`));
    for (const line of proposal.added) shownLines.append(el("div", "lines added", `+ ${line}`));
    staleNote.hidden = !proposal.stale;
    buttons.accept.hidden = buttons.edit.hidden = proposal.stale;
    buttons.fresh.hidden = !proposal.stale;
    section.hidden = false;
  }

  async function load() {
    const result = await call("GET", "/v1/memory/proposal");
    if (!result.ok) { tell(errorMessage(result), "error"); return; }
    show(result.data.proposal);
  }

  async function accept() {
    const seen = shown;
    const result = await call("POST", "/v1/memory/proposal/accept", undefined,
      { "If-Match": `"${seen.etag}"` });
    if (result.status === 412 || result.status === 404) {
      await load();
      tell(result.status === 412
        ? "Memory was changed since this suggestion was made, so it was not saved over that"
          + " change. Review again for a fresh suggestion."
        : "A newer review replaced the suggestion you saw: look at this one before accepting.",
      "error");
      if (!shown) editor.say("The suggestion is gone: it was dismissed elsewhere.", "error");
      return;
    }
    if (!result.ok) { tell(errorMessage(result), "error"); return; }
    show(null);
    await editor.accepted(result.data);
  }

  function edit() {
    if (editor.edited()) {
      tell("The memory below has edits you have not saved: save them, or Load server copy,"
        + " before you edit the suggestion.", "error");
      return;
    }
    editing = shown;
    editor.editText(shown.block);
    tell("The suggestion is in the editor below: change it as you like and Save. Nothing is"
      + " saved until you do.");
  }

  async function dismiss() {
    const result = await call("DELETE", "/v1/memory/proposal");
    if (!result.ok && result.status !== 404) { tell(errorMessage(result), "error"); return; }
    show(null);
    editor.say("Dismissed the suggestion; the memory is unchanged.");
  }

  async function reviewAgain() {
    buttons.fresh.disabled = true;
    tell("Reviewing the memory as it is now… this can take a minute.");
    try {
      const result = await call("POST", "/v1/memory/review", {});
      if (!result.ok) {
        const running = result.status === 409;
        tell(running
          ? "A review is running already; its suggestion shows here when it ends."
          : `${errorMessage(result)} Nothing changed.`, "error");
        return;
      }
      show(result.data.proposal);
      if (!result.data.proposal) {
        editor.say("Reviewed again: nothing in the memory needs to change.", "ok");
      }
    } finally {
      buttons.fresh.disabled = false;
    }
  }

  buttons.accept.addEventListener("click", accept);
  buttons.edit.addEventListener("click", edit);
  buttons.dismiss.addEventListener("click", dismiss);
  buttons.fresh.addEventListener("click", reviewAgain);

  return {
    load,
    // the editor saved: a suggestion it held is used up; any other may be stale now
    async saved() {
      if (editing !== null) {
        const used = editing;
        editing = null;
        const pending = await call("GET", "/v1/memory/proposal");
        if (pending.ok && pending.data.proposal?.etag === used.etag) {
          await call("DELETE", "/v1/memory/proposal");
        }
      }
      await load();
    },
    // the editor dropped its text (Load server copy, Clear all)
    forget() { editing = null; },
  };
}
