"""RefreshPolicy: when resuming a live session to drop stale results pays (issue #19)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flower.core.refresh import RefreshPolicy
from flower.errors import ConfigError


def test_a_refresh_needs_the_floor_and_the_share() -> None:
    policy = RefreshPolicy(min_tokens=20_000, share=0.3)
    assert policy.needed(10_000) == 20_000 and policy.needed(100_000) == 30_000
    assert not policy.worth(100_000, 29_999) and policy.worth(100_000, 30_000)
    assert not policy.worth(40_000, 19_000) and policy.worth(40_000, 20_000)


@given(context=st.integers(0, 2_000_000), stale=st.integers(0, 2_000_000), growth=st.integers(0, 2_000_000))
def test_the_next_check_never_skips_a_refresh_that_would_pay(context: int, stale: int, growth: int) -> None:
    """The stale part grows at most as fast as the context: until the context has grown by what was missing,
    no refresh can be worth it; the next check waits exactly that long, or a tenth of the floor when less
    was missing (checks are not free), and always lies ahead."""
    policy = RefreshPolicy()
    stale = min(stale, context)
    missing = policy.needed(context) - stale
    later = policy.next_check(context, stale)
    assert later == context + max(missing, policy.min_tokens // 10) > context
    if growth < missing:
        assert not policy.worth(context + growth, stale + growth)


@pytest.mark.parametrize("kwargs", [{"min_tokens": 0}, {"share": 0}, {"share": 1.5}])
def test_bad_settings_are_one_line_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match="RefreshPolicy"):
        RefreshPolicy(**kwargs)  # type: ignore[arg-type]
