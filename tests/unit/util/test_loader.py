"""`flower.util.loader`: what a user's file that fails while it loads is reported as."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.errors import ConfigError, FlowError
from flower.util.loader import import_file, load_target


def test_a_flower_error_raised_while_a_file_loads_names_the_file_and_line(tmp_path: Path) -> None:
    """A spec or step that refuses itself at the top of the file stops the whole file from loading, so
    `flower check flow.py:wf` reports it even when `wf` is fine: the line says where it is."""
    flow = tmp_path / "flow.py"
    flow.write_text("from flower import AgentSpec, Step, Workflow\n"
                    "reader = AgentSpec(name='reader', instructions='x')\n"
                    "wf = Workflow([Step('a', reader, 'x')])\n"
                    "other = Step('survey', reader, 'x', output_type=int)\n")
    with pytest.raises(FlowError) as refused:
        load_target(f"{flow}:wf")
    assert str(refused.value) == (f"{flow}:4: step survey: output_type must be a pydantic model class or a JSON "
                                  "schema (a dict), not int")
    flow.write_text("from flower.errors import FlowError\n\n\ndef f():\n    raise FlowError('bad flow')\n\n\nf()\n")
    with pytest.raises(FlowError) as failed:  # the class is kept; the line is the file's, not flower's
        import_file(flow)
    assert str(failed.value) == f"{flow}:5: bad flow"
    flow.write_text("from flower.errors import ConfigError\nraise ConfigError('bad config')\n")
    with pytest.raises(ConfigError, match=r"flow.py:2: bad config$"):
        import_file(flow)
