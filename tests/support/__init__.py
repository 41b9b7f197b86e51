"""Helpers shared by the tests: stored sessions and transcripts, hook inputs, the glance corpus, the command
line and a stored run dir, raw HTTP to the scripted API, a pty driver and headless Chromium. Test modules
import from here, never from one another; fixtures live in the conftest.py files."""
