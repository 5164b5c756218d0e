"""Signing in to the pages with a user token (token mode).

A host application links to ``/login?token=…``. That link is a cross-site
navigation, which does not carry the browser's SameSite=Strict session
cookie, so the server cannot see there whether someone is signed in already.
The page it answers with posts the token back from this site, with the
cookie; a session of another user is then switched only after the person
confirms it on a page another site cannot forge (login CSRF). A bad token
gets a readable page, never raw JSON.
"""

from __future__ import annotations

import html
import secrets
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memoro.auth import SESSION_COOKIE, Claims, www_authenticate
from memoro.errors import Unauthorized
from memoro.web.security import AuthConfig, check_origin, verified_token

router = APIRouter(include_in_schema=False)
TEMPLATE = Path(__file__).parent / "templates" / "login.html"
# so that a form posted back from these pages carries this site's Origin
# (the other pages send no referrer, which makes a browser send Origin: null)
SAME_ORIGIN = {"Referrer-Policy": "same-origin"}


def page(
    heading: str, content: str, status: int = 200, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """A sign-in page; ``content`` is HTML the caller has escaped."""
    text = TEMPLATE.read_text("utf-8").replace("{{heading}}", html.escape(heading))
    return HTMLResponse(
        text.replace("{{content}}", content),
        status_code=status,
        headers={"Cache-Control": "no-store", **(headers or {})},
    )


def not_signed_in(request: Request) -> HTMLResponse:
    return page(
        "Not signed in",
        "<p>Open this page through your application's link: it ends in"
        " <code>/login?token=…</code> with a short-lived user token.</p>",
        401,
        {"WWW-Authenticate": www_authenticate(request.headers, request.cookies)},
    )


def _bad_token(exc: Unauthorized) -> HTMLResponse:
    return page(
        "This sign-in link does not work",
        f"<p>{_sentence(exc)}.</p>"
        "<p>Sign-in links are short-lived and work once per sign-in. Go back to your"
        " application and open memoro from there again.</p>",
        401,
        {"WWW-Authenticate": 'Bearer realm="memoro", error="invalid_token"'},
    )


def _sentence(exc: Exception) -> str:
    text = str(exc)
    return html.escape(text[:1].upper() + text[1:])


def _hidden(name: str, value: str) -> str:
    return f'<input type="hidden" name="{name}" value="{html.escape(value, quote=True)}">'


@router.get("/login")
def login_link(request: Request, token: str = "") -> Response:
    """Check the token, then post it back from this site (see the module)."""
    auth: AuthConfig = request.app.state.auth
    if auth.mode != "token" or auth.tokens is None:
        return RedirectResponse("/memory", status_code=303)
    try:
        auth.tokens.verify(token)
    except Unauthorized as exc:
        return _bad_token(exc)
    return page(
        "Signing in…",
        f'<form method="post" action="/login" data-auto-submit>{_hidden("token", token)}'
        '<p><button type="submit">Continue to memoro</button></p></form>',
        headers=SAME_ORIGIN,
    )


@router.post("/login")
async def login(request: Request) -> Response:
    """Start a session for the token's user, unless the browser is signed in
    as someone else and the person has not confirmed the switch."""
    auth: AuthConfig = request.app.state.auth
    if auth.mode != "token" or auth.tokens is None or auth.sessions is None:
        return RedirectResponse("/memory", status_code=303)
    try:
        check_origin(request)
    except Unauthorized as exc:
        return page("Sign-in refused", f"<p>{_sentence(exc)}.</p>", 403)
    form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
    try:
        claims = await verified_token(request, auth.tokens, form.get("token", ""))
    except Unauthorized as exc:
        return _bad_token(exc)
    current = auth.session(request)
    if current is not None and current.user_id != claims.user_id:
        confirmed = form.get("switch") == "yes" and secrets.compare_digest(
            form.get("csrf", ""), current.csrf or ""
        )
        if not confirmed:
            return _confirm_switch(current, claims, form["token"])
    session, _ = auth.sessions.start(claims.user_id)
    response = RedirectResponse("/memory", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


def _confirm_switch(current: Claims, new: Claims, token: str) -> HTMLResponse:
    now, other = html.escape(current.user_id), html.escape(new.user_id)
    return page(
        "Switch account?",
        f"<p>This browser is signed in to memoro as <strong>{now}</strong>. The link you"
        f" followed signs in as <strong>{other}</strong>.</p>"
        "<p>If you did not mean to change accounts, stay: a link from another site can"
        " try to switch you to an account that is not yours.</p>"
        f'<form method="post" action="/login">{_hidden("token", token)}'
        f"{_hidden('csrf', current.csrf or '')}{_hidden('switch', 'yes')}"
        f'<p class="buttons"><a href="/memory">Stay signed in as {now}</a>'
        f' <button type="submit" class="danger">Switch to {other}</button></p></form>',
        headers=SAME_ORIGIN,
    )
