// Calls to memoro's JSON API from the pages: same origin, the session
// cookie, and the CSRF token from the page's meta tag on every write.
export const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? "";

export async function call(method, path, body, headers = {}) {
  const init = { method, credentials: "same-origin", headers: { "X-CSRF-Token": csrf, ...headers } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  return { status: response.status, ok: response.ok, data, headers: response.headers };
}

export function errorMessage(result) {
  return result.data?.error?.message ?? `The server answered ${result.status}.`;
}

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;  // text, never markup
  return node;
}
