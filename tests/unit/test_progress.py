"""The CLI's progress displays: auto picks plain lines off a terminal, rich draws the step
time, machines, stragglers and caught liars, an unknown kind is a clear error."""

import io
from types import SimpleNamespace

import pytest

from elastic_coded.errors import ElasticCodedError
from elastic_coded.jobs import Progress
from elastic_coded.progress import RichProgress, make_progress


def _report(**kw):
    base = dict(t_total=0.012, available=("m0", "m1", "m2"), stragglers=("m1",), failed=(),
                restarted=(), caught=())
    return SimpleNamespace(**{**base, **kw})


def test_auto_is_plain_off_a_terminal_and_none_is_none():
    assert isinstance(make_progress("auto", 5, io.StringIO()), Progress)
    assert make_progress("none", 5) is None


def test_rich_shows_the_step_machines_stragglers_and_liars():
    out = io.StringIO()
    p = make_progress("rich", 3, out)
    assert isinstance(p, RichProgress)
    p(0, _report())
    p(1, _report(caught=("m2",), failed=("m0",)))
    p(2, _report())
    p.close()
    text = out.getvalue()
    assert "3/3" in text and "12 ms/step" in text and "3 machines" in text
    assert "3 stragglers" in text and "1 failed" in text and "1 liars caught" in text


def test_an_unknown_kind_is_a_clear_error():
    with pytest.raises(ElasticCodedError, match="--progress: 'fancy' is not one of"):
        make_progress("fancy", 3)
