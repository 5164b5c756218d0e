// Sign-in: the page a /login link lands on posts its token back to this site,
// so that the browser's session cookie comes along (see memoro/web/login.py).
// A page that asks before switching accounts has no such form.
const form = document.querySelector("form[data-auto-submit]");
if (form) form.submit();
