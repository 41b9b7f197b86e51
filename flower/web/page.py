"""The HTML of `flower web`: one shell per page, filled in by `static/web.js` from the live stream.

No build step: the shell is a few lines of HTML, the script and the style sheet are plain files served
beside it. The shell carries only escaped values (the run id, the source's label); everything a run holds
(model text, tool output, questions) reaches the page as JSON and is put in as text by the script, and
the charts are the report's SVG, whose texts the report escaped.

Invariant: every value written into HTML here goes through `html.escape`; `POLICY` lets the page run
only the app's own script, so even a text that slipped through unescaped could run nothing.
"""

from __future__ import annotations

import html
from importlib import resources

__all__ = ["POLICY", "asset", "not_found_page", "run_page", "runs_page"]

POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
          "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""The Content-Security-Policy of every page: no inline or foreign script, no plugin, no framing."""


def _shell(title: str, body: str, **data: str) -> str:
    attrs = "".join(f' data-{name}="{html.escape(value, quote=True)}"' for name, value in data.items())
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{html.escape(title)}</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/web.css"></head>'
        f'<body{attrs}><header><a href="/" class="home">flower web</a>'
        '<span id="live" class="live">connecting…</span></header>'
        f'{body}<script src="/web.js"></script></body></html>\n'
    )


def runs_page(source: str) -> str:
    body = (f'<main><h1>Runs <small>{html.escape(source)}</small></h1>'
            '<p class="tools"><input id="filter" type="search" placeholder="filter runs (id, workflow, state)">'
            '</p><table id="runs"></table><h2>Waiting questions</h2><div id="questions"></div>'
            '<p id="notice" class="notice" role="status"></p></main>')
    return _shell(f"flower web: {source}", body, page="runs")


def run_page(run_id: str) -> str:
    body = (
        '<main><h1>Run <code id="run-id"></code> <span id="state" class="state"></span></h1>'
        '<p id="summary" class="summary"></p>'
        '<section class="steer"><h2>Steer</h2><div id="questions"></div>'
        '<p><textarea id="mail" rows="2" placeholder="a message for the run\'s inbox, a remark or a focus"></textarea>'
        '<button id="send">Send to inbox</button> <button id="interrupt">Interrupt with this remark</button> '
        '<button id="handoff">Hand over, this text the focus</button></p>'
        '<p><button id="cancel">Cancel run</button> <button id="cancel-yes" hidden>Yes, cancel it</button></p>'
        '<p id="notice" class="notice" role="status"></p></section>'
        '<h2>Steps</h2><ol id="steps"></ol>'
        '<h2>Main-thread context per API message</h2><div id="context"></div>'
        '<h2>Threads over time</h2><div id="timeline"></div>'
        '<h2>Cost</h2><div class="cost"><table id="by-worker"></table><table id="by-model"></table></div>'
        '<h2>Log <select id="log-session"></select></h2><ol id="log" class="log"></ol></main>'
    )
    return _shell(f"flower web: run {run_id}", body, page="run", run=run_id)


def not_found_page(what: str) -> str:
    body = f'<main><h1>Not found</h1><p id="missing">{html.escape(what)}</p><p><a href="/">All runs</a></p></main>'
    return _shell("flower web: not found", body, page="missing")


def asset(name: str) -> str:
    """A file of `flower/web/static/`."""
    return resources.files("flower.web").joinpath("static").joinpath(name).read_text(encoding="utf-8")
