// A small Markdown for the assistant's answers on the Chat page. The model's
// text is never HTML: it is cut into blocks and spans and built as DOM nodes
// whose text is set as text, so a tag in it shows as the tag. Only these
// shapes exist: paragraphs and line breaks, **bold**, *italics*, `code`,
// ``` fenced code ```, "-" and "1." lists, and [links](url) whose url is
// http, https or mailto (any other link stays text, as written).

const SPAN = 500; // the longest bold, italic, code or link text, so hostile input stays linear
const SAFE_URL = /^(https?:\/\/|mailto:)[^\s]*$/i;
const INLINE = [
  ["code", new RegExp("`([^`\\n]{1," + SPAN + "})`", "g")],
  ["link", new RegExp("\\[([^\\]\\n]{1," + SPAN + "})\\]\\(([^()\\s]{1," + SPAN + "})\\)", "g")],
  ["strong", new RegExp("\\*\\*(?=\\S)([^\\n]{0," + SPAN + "}?\\S)\\*\\*", "g")],
  ["strong", new RegExp("(?<![\\w_])__(?=\\S)([^\\n]{0," + SPAN + "}?\\S)__(?![\\w_])", "g")],
  ["em", new RegExp("\\*(?=[^\\s*])([^*\\n]{0," + SPAN + "}?[^\\s*])\\*", "g")],
  ["em", new RegExp("(?<![\\w_])_(?=[^\\s_])([^_\\n]{0," + SPAN + "}?[^\\s_])_(?![\\w_])", "g")],
];
const FENCE = /^\s{0,3}```/;
const ITEM = /^\s{0,3}(?:([-*+])|(\d{1,9})[.)])\s+(.*)$/;
const HEADING = /^\s{0,3}#{1,6}\s+(.*)$/;

function node(tag, text) {
  const made = document.createElement(tag);
  if (text !== undefined) made.textContent = text;
  return made;
}

// The spans of one line of text, appended to ``parent``. Each pattern's
// next match is kept until the text before it is used up, so every pattern
// reads the line about once, however many spans it has.
export function inline(text, parent, depth = 0) {
  const next = INLINE.map(() => undefined); // undefined: not looked for; null: none left
  let pos = 0;
  while (pos < text.length) {
    let best = -1;
    if (depth < 4) {
      INLINE.forEach(([, pattern], j) => {
        if (next[j] === undefined || (next[j] !== null && next[j].index < pos)) {
          pattern.lastIndex = pos;
          next[j] = pattern.exec(text);
        }
        if (next[j] && (best < 0 || next[j].index < next[best].index)) best = j;
      });
    }
    if (best < 0) { parent.append(text.slice(pos)); return parent; }
    const found = next[best];
    const kind = INLINE[best][0];
    if (found.index > pos) parent.append(text.slice(pos, found.index));
    if (kind === "code") {
      parent.append(node("code", found[1]));
    } else if (kind === "link") {
      const url = found[2];
      if (SAFE_URL.test(url)) {
        const link = node("a");
        link.href = url;
        link.rel = "noopener noreferrer nofollow";
        link.target = "_blank";
        parent.append(inline(found[1], link, depth + 1));
      } else {
        parent.append(found[0]); // not a link we follow: the text as written
      }
    } else {
      parent.append(inline(found[1], node(kind), depth + 1));
    }
    pos = found.index + found[0].length;
  }
  return parent;
}

// ``markdown`` as a fragment of DOM nodes, safe to put into the page.
export function render(markdown) {
  const out = document.createDocumentFragment();
  const lines = String(markdown).replace(/\r\n?/g, "\n").split("\n");
  let paragraph = null;
  let list = null;
  const close = () => { paragraph = null; list = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (FENCE.test(line)) {
      const code = [];
      for (i++; i < lines.length && !FENCE.test(lines[i]); i++) code.push(lines[i]);
      const pre = node("pre");
      pre.append(node("code", code.join("\n")));
      out.append(pre);
      close();
      continue;
    }
    if (!line.trim()) { close(); continue; }
    const item = ITEM.exec(line);
    if (item) {
      const tag = item[1] ? "ul" : "ol";
      if (list === null || list.tagName.toLowerCase() !== tag) {
        list = node(tag);
        if (tag === "ol" && item[2] !== "1") list.start = Number(item[2]);
        out.append(list);
      }
      list.append(inline(item[3], node("li")));
      paragraph = null;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const p = node("p");
      p.append(inline(heading[1], node("strong")));
      out.append(p);
      close();
      continue;
    }
    if (list !== null && /^\s{2,}\S/.test(line)) { // a list item's next line
      const last = list.lastElementChild;
      last.append(node("br"));
      inline(line.trim(), last);
      continue;
    }
    list = null;
    if (paragraph === null) {
      paragraph = node("p");
      out.append(paragraph);
    } else {
      paragraph.append(node("br"));
    }
    inline(line, paragraph);
  }
  return out;
}
