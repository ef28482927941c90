"""normalize_url against the vectors the Go SDK checks too."""
import json
import pathlib

import pytest

from oncejob import normalize_url

VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[2] / "testdata" / "normalizeurl_vectors.json").read_text("utf-8"))


@pytest.mark.parametrize("case", VECTORS["normalize"], ids=[c["in"] for c in VECTORS["normalize"]])
def test_normalize_url_matches_go(case):
    got = normalize_url(case["in"])
    assert got == case["want"]
    assert normalize_url(got) == got


@pytest.mark.parametrize("bad", VECTORS["invalid"])
def test_normalize_url_refuses_what_go_refuses(bad):
    with pytest.raises(ValueError):
        normalize_url(bad)
