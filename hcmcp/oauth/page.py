"""The sign-in page's HTML and CSS (server-rendered, no JavaScript); the routes add its headers.

Every value shown is escaped: the client's name is whatever it registered. The key typed in is
never written back into a page.
"""

from __future__ import annotations

from html import escape

STYLESHEET = """\
body { font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto; padding: 0 1rem; color: #1b1b1b; }
h1 { font-size: 1.4rem; }
.error { color: #a40000; font-weight: 600; }
label { display: block; margin: 1rem 0 .3rem; font-weight: 600; }
input[type=password] { width: 100%; padding: .5rem; font-family: monospace; box-sizing: border-box; }
.buttons { margin-top: 1.2rem; display: flex; gap: .8rem; }
button { padding: .5rem 1.2rem; font-size: 1rem; }
small { color: #555; }
"""


def _document(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>"
        '<link rel="stylesheet" href="/oauth/sign-in.css"></head>'
        f"<body>{body}</body></html>\n"
    )


def render_sign_in(
    *,
    client_name: str,
    redirect_host: str,
    instance: str,
    request: str,
    error: str | None = None,
) -> str:
    """The sign-in page: who asks, for which instance, the key field, approve and deny."""
    problem = f'<p class="error" role="alert">{escape(error)}</p>' if error else ""
    return _document(
        "Sign in to hcmcp",
        f"<h1>Connect {escape(client_name)} to Healthchecks</h1>"
        f"<p><strong>{escape(client_name)}</strong> (returning to <strong>{escape(redirect_host)}"
        f"</strong>) asks to use your Healthchecks project on <strong>{escape(instance)}</strong>.</p>"
        f"{problem}"
        '<form method="post" action="/oauth/authorize">'
        f'<input type="hidden" name="request" value="{escape(request)}">'
        '<label for="key">Your project\'s API key</label>'
        '<input type="password" name="key" id="key" autocomplete="off" spellcheck="false">'
        "<p><small>A read-only key (hcr_...) lets the client read checks; a read-write key "
        "(hcw_...) also lets it create, update, pause and resume them. Deletes still ask you "
        "each time. Find the key in Project Settings &gt; API Access.</small></p>"
        '<div class="buttons">'
        '<button type="submit" name="decision" value="approve" id="approve">Approve</button>'
        '<button type="submit" name="decision" value="deny" id="deny">Deny</button>'
        "</div></form>",
    )


def render_problem(*, title: str, message: str) -> str:
    """A page without a form: a request that cannot go on, and why."""
    return _document(title, f"<h1>{escape(title)}</h1><p>{escape(message)}</p>")
