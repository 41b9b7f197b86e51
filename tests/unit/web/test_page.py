"""The page shells of `flower web` escape what they hold and allow only the app's own script (issue #29)."""

from __future__ import annotations

from flower.web import page


def test_the_shells_escape_the_run_id_and_the_source() -> None:
    hostile = '"><script>alert(1)</script>'
    for html in (page.run_page(hostile), page.runs_page(hostile), page.not_found_page(f"unknown run {hostile}")):
        assert "<script>alert" not in html and "&lt;script&gt;" in html
        assert html.count("<script") == 1 and '<script src="/web.js">' in html  # the app's own, nothing else


def test_the_policy_forbids_inline_and_foreign_script() -> None:
    assert "script-src 'self';" in page.POLICY and "unsafe-inline" not in page.POLICY.split("style-src")[0]
    assert "frame-ancestors 'none'" in page.POLICY


def test_the_script_and_style_are_packaged() -> None:
    assert "textContent" in page.asset("web.js") and "body{" in page.asset("web.css")
