// The block's normalization and character count, the same
// algorithm as memoro/block.py over the same tables (block-rules.js is
// generated from it), so the live counter agrees with the server.
import * as R from "./block-rules.js";

function inRanges(cp, ranges) {
  let lo = 0, hi = ranges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (cp < ranges[mid][0]) hi = mid - 1;
    else if (cp > ranges[mid][1]) lo = mid + 1;
    else return true;
  }
  return false;
}

const NEWLINES = new Set(R.NEWLINES);
const EDGE = new Set(R.EDGE_WHITESPACE);
const isControl = (cp) => cp < 0x20 || (cp >= 0x7f && cp < 0xa0);
const isNonchar = (cp) => (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) === 0xfffe;
const isIgnorable = (cp) => inRanges(cp, R.IGNORABLE);
const isJoiningLetter = (cp) => inRanges(cp, R.JOINING_SCRIPTS) && !isIgnorable(cp);
const isBase = (cp) => !EDGE.has(cp) && !isIgnorable(cp);

function keepJoiner(cp, before, after) {
  if (before === undefined || after === undefined) return false;
  if (isJoiningLetter(before) && isJoiningLetter(after)) return true;
  const emojiBefore = inRanges(before, R.PICTOGRAPHIC) || inRanges(before, R.EMOJI_LINKS);
  return cp === R.ZWJ && emojiBefore && inRanges(after, R.PICTOGRAPHIC);
}

export function normalize(text) {
  const points = Array.from(text.replaceAll("\r\n", "\n"), (c) => c.codePointAt(0));
  const out = [];
  for (let i = 0; i < points.length; i++) {
    const cp = points[i];
    if (NEWLINES.has(cp)) out.push(0x0a);
    else if (isControl(cp)) { if (cp === 0x09 || cp === 0x0a) out.push(cp); }
    else if ((cp >= 0xd800 && cp <= 0xdfff) || isNonchar(cp)) continue;
    else if (inRanges(cp, R.VARIATION_SELECTORS)) {
      if (out.length && isBase(out[out.length - 1])) out.push(cp);
    } else if (cp === R.ZWJ || cp === R.ZWNJ) {
      if (keepJoiner(cp, out[out.length - 1], points[i + 1])) out.push(cp);
    } else if (!isIgnorable(cp)) out.push(cp);
  }
  let start = 0, end = out.length;
  while (start < end && EDGE.has(out[start])) start++;
  while (end > start && EDGE.has(out[end - 1])) end--;
  let result = "";
  for (let i = start; i < end; i += 4096) {
    result += String.fromCodePoint(...out.slice(i, Math.min(end, i + 4096)));
  }
  return result;
}

export function charCount(text) {
  let n = 0;
  for (const _ of normalize(text)) n++;
  return n;
}

export const LIMIT = R.LIMIT;

export function header(count) {
  return `Personal memory (${count.toLocaleString("en-US")}/${LIMIT.toLocaleString("en-US")} characters)`;
}

window.memoroBlock = { normalize, charCount, header, LIMIT };
