"""The sign-in page's HTML and CSS: the one page a person sees while a client connects (issue 32).

Server-rendered and without any script (the CSP allows none): a form that posts the Healthchecks
API key, the sealed authorization request (the anti-forgery field) and the decision, readable
without the stylesheet and usable with a keyboard (every field has its label; Enter approves).
It names the client asking (the name it registered, which anyone can choose, so the host it
returns to stands beside it), the instance the key is checked with, and what a key allows once
verified. Every value is escaped, attribute values too; the key typed in is never passed here, so
no page can write it back. The routes add the headers (answers.py) and serve STYLESHEET at
/oauth/sign-in.css (CSP style-src 'self': no inline style).
"""

from __future__ import annotations

from html import escape

STYLESHEET = """\
:root { color-scheme: light dark; --fg: #1d2330; --muted: #5b6475; --line: #d5dae3;
  --bg: #f5f7fa; --card: #fff; --accent: #1f6feb; --danger-bg: #fdecec; --danger: #a4262c; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ef; --muted: #a3acbb; --line: #3a4150;
  --bg: #14171d; --card: #1d2129; --accent: #4c8dff; --danger-bg: #3b1d20; --danger: #ff9ea4; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 32rem; margin: 2rem auto; padding: 1.5rem 1.75rem; background: var(--card);
  border: 1px solid var(--line); border-radius: 12px; }
h1 { font-size: 1.35rem; margin: 0 0 .75rem; line-height: 1.3; overflow-wrap: anywhere; }
h2 { font-size: 1rem; margin: 1.25rem 0 .25rem; }
p, ul { margin: .5rem 0; }
ul { padding-left: 1.25rem; }
.muted { color: var(--muted); font-size: .9rem; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .9em;
  overflow-wrap: anywhere; }
.error { background: var(--danger-bg); color: var(--danger); border-radius: 8px;
  padding: .6rem .8rem; font-weight: 600; }
label { display: block; font-weight: 600; margin-top: 1.25rem; }
input[type=password] { width: 100%; margin-top: .35rem; padding: .6rem .7rem;
  font: inherit; font-family: ui-monospace, monospace; border: 1px solid var(--line);
  border-radius: 8px; background: var(--bg); color: var(--fg); }
input:focus, button:focus { outline: 3px solid var(--accent); outline-offset: 2px; }
.actions { display: flex; gap: .75rem; margin-top: 1.5rem; }
button { flex: 1; font: inherit; font-weight: 600; padding: .65rem 1rem; border-radius: 8px;
  border: 1px solid var(--line); background: var(--card); color: var(--fg); cursor: pointer; }
button#approve { background: var(--accent); border-color: var(--accent); color: #fff; }
footer { margin-top: 1.25rem; }
"""


def _document(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{escape(title)}</title>\n"
        '<link rel="stylesheet" href="/oauth/sign-in.css">\n</head>\n'
        f"<body>\n<main>\n{body}</main>\n</body>\n</html>\n"
    )


def render_sign_in(
    *,
    client_name: str,
    redirect_host: str,
    instance: str,
    request: str,
    error: str | None = None,
) -> str:
    """The sign-in page of one authorization request: who asks, where it returns, the instance,
    what a key allows, the key field, Allow and Deny. ``request`` is the sealed request (the
    hidden anti-forgery field); ``error`` the line for a refused key (never the key)."""
    name, host, site = escape(client_name), escape(redirect_host), escape(instance)
    problem = f'<p class="error" id="error" role="alert">{escape(error)}</p>\n' if error else ""
    return _document(
        f"Connect {client_name} to Healthchecks",
        f'<h1>Connect <span id="client-name">{name}</span> to Healthchecks</h1>\n'
        f"<p>An application that calls itself <strong>{name}</strong>, and will send you back to\n"
        f'<code id="redirect-host">{host}</code>, asks to use your checks on\n'
        f'<code id="instance">{site}</code> through this MCP server.</p>\n'
        '<p class="muted">It chose that name itself: go on only if you started this connection\n'
        "and you recognise where it sends you back.</p>\n"
        f"{problem}"
        '<form method="post" action="/oauth/authorize">\n'
        f'<input type="hidden" name="request" value="{escape(request)}">\n'
        '<label for="key">Your Healthchecks API key</label>\n'
        '<input type="password" name="key" id="key" autocomplete="off" spellcheck="false"'
        ' autocapitalize="off" aria-describedby="key-help">\n'
        '<p class="muted" id="key-help">In Healthchecks: your project\'s Settings, API Access.\n'
        f"It is checked with <code>{site}</code> before anything is issued, and kept only inside\n"
        "the encrypted tokens this application gets.</p>\n"
        "<h2>What the key allows, once verified</h2>\n<ul>\n"
        "<li>A <strong>read-only</strong> key (it starts with <code>hcr_</code>): the application\n"
        "can read your checks, pings, flips, integrations and badges.</li>\n"
        "<li>A <strong>read-write</strong> key: it can also create, update, pause and resume\n"
        "checks. Deleting a check still asks you, every time.</li>\n</ul>\n"
        '<div class="actions">\n'
        '<button type="submit" name="decision" value="approve" id="approve">Allow</button>\n'
        '<button type="submit" name="decision" value="deny" id="deny">Deny</button>\n'
        "</div>\n</form>\n"
        '<footer class="muted">Access lasts an hour and renews for up to 30 days; rotating the\n'
        "key in Healthchecks ends it.</footer>\n",
    )


def render_problem(*, title: str, message: str) -> str:
    """A page without a form: a request that cannot go on, and why."""
    return _document(
        title, f'<h1>{escape(title)}</h1>\n<p id="problem" role="alert">{escape(message)}</p>\n'
    )
