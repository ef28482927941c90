"""The findings of issue 19, one test each, answered as docs/keys.md says;
clientsdk/keys_spec_ext_test.go asserts the same in Go."""
import json

import pytest

from oncejob import normalize_url, submit_key, work_id
from oncejob.workid import MAX_DEPTH


def normalized(raw):
    got = normalize_url(raw)
    assert normalize_url(got) == got, "normalize_url is idempotent"
    return got


def test_encoded_slash_never_decoded():
    assert normalized("https://example.com/a%2Fb c") == "https://example.com/a%2Fb%20c"
    assert normalized("https://example.com/a/b c") == "https://example.com/a/b%20c"
    assert normalized("https://example.com/a%2fb") == "https://example.com/a%2Fb"
    assert normalized("https://example.com/a%252F") == "https://example.com/a%252F"


def test_query_parameter_never_dropped():
    assert normalized("https://example.com/p?a=1;b=2&c=3") == "https://example.com/p?a=1%3Bb%3D2&c=3"
    assert normalized("https://example.com/p?a=%zz&b=1") == "https://example.com/p?a=%25zz&b=1"
    assert normalized("https://example.com/p?b=%2&a=%") == "https://example.com/p?a=%25&b=%252"
    assert normalized("https://example.com/p?a&&=1&utm_source=x&") == "https://example.com/p?=1&a="


@pytest.mark.parametrize("raw", [
    "https://Bücher.example/", "https://BÜCHER.EXAMPLE/", "https://xn--bcher-kva.example/",
    "https://XN--BCHER-KVA.example/", "https://B%C3%BCcher.example/", "https://bu\u0308cher.example/",
    "https://bücher\u3002example/", "https://bücher.example:443/",
])
def test_host_has_one_form(raw):
    assert normalized(raw) == "https://xn--bcher-kva.example/"


def test_host_forms():
    assert normalized("https://faß.de/") == "https://xn--fa-hia.de/"  # non-transitional
    assert normalized("https://ex%41mple.com/") == "https://example.com/"
    assert normalized("https://[0:0:0:0:0:FFFF:0102:0304]:443/") == "https://[::ffff:1.2.3.4]/"


@pytest.mark.parametrize("bad", [
    "https://☃.example/", "https://a\u200db.example/", "https://-ü.example/", "https://ex%zzample.com/",
    "https://[::1%25eth0]/", "https://ü_x.example/", "https://example.com:65536/",
])
def test_host_refused(bad):
    with pytest.raises(ValueError):
        normalize_url(bad)


@pytest.mark.parametrize("bad", [
    "https://exa\tmple.com/", "https://example.com/a\nb", "\x01https://example.com/", "https://example.com/a\rb",
    "https://example.com/a\x00", "https://example.com/a\x7f", "https://example.com/\x85", "https://example.com/?a=\x1f",
    "https://example.com/\udcff",
])
def test_control_characters_refused(bad):
    with pytest.raises(ValueError):
        normalize_url(bad)


def test_surrounding_white_space_trimmed():
    assert normalized("\t https://example.com \r\n") == "https://example.com/"


@pytest.mark.parametrize("raw", ["https://example.com/a[1]", "https://example.com/a%5B1%5D", "https://example.com/a%5b1%5d"])
def test_brackets_in_path_encoded(raw):
    assert normalized(raw) == "https://example.com/a%5B1%5D"


def nested(depth):
    v = "x"
    for _ in range(depth):
        v = [v]
    return v


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 10000, 100000])
def test_deep_nesting_refused_not_crashed(depth):
    with pytest.raises(ValueError, match="nest deeper"):
        work_id("k", 1, nested(depth))
    obj = {}
    for _ in range(depth):
        obj = {"k": obj}
    with pytest.raises(ValueError, match="nest deeper"):
        work_id("k", 1, obj)


def test_nesting_to_the_bound_accepted():
    assert len(work_id("k", 1, json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH))) == 64


@pytest.mark.parametrize("payload", [{"s": "x\ud800y"}, {"\udc00": 1}, ["\ud83d\x41"], "\ude00\ud83d", json.loads('{"s":"\\ud800"}')])
def test_lone_surrogates_refused(payload):
    with pytest.raises(ValueError, match="not valid Unicode"):
        work_id("k", 1, payload)


def test_surrogate_pair_and_replacement_character():
    assert work_id("k", 1, json.loads('"\\ud83d\\ude00"')) == work_id("k", 1, "😀")
    assert len(work_id("k", 1, {"s": "\ufffd"})) == 64
    # Only the value counts: a member a later duplicate replaces is gone.
    assert len(work_id("k", 1, json.loads('{"a":"\\ud800","a":1}'))) == 64


def test_submit_key_refuses_text_that_is_not_unicode():
    with pytest.raises(ValueError):
        submit_key("summarize", "caf\udce9")
    assert len(submit_key("summarize", "café")) == 64


def test_idna_edges_of_issue_30():
    """Issue 30, finding 7, as docs/keys.md decides it (the Go twin:
    TestKeysIDNAEdges): xn-- only as the A-label of a valid U-label, the
    IgnorableBlocks' marks refused, a joiner only right after a virama, and
    capital sharp s mapped to ss as UTS #46 maps it."""
    import unicodedata
    assert normalized("https://ｘｎ－－bcher-kva.example/") == "https://xn--bcher-kva.example/"
    assert normalized("https://क्\u200dष.example/") == "https://xn--11b2ezcw70k.example/"
    assert normalized("https://क्\u200cष.example/") == "https://xn--11b2ezcs70k.example/"
    assert normalized("https://faẞ.de/") == "https://fass.de/"
    assert normalized("https://faß.de/") == "https://xn--fa-hia.de/"
    for bad in ["https://xn--é-.com/", "https://XN--é.com/", "https://xn--bücher.example/", "https://xn--－x0y.example/",
                "https://ｘｎ－－zz.example/", "https://a\u200db.example/", "https://\u200dक.example/", "https://क\u200d.example/",
                "https://ب\u200cب.example/", "https://ب\u200c٢.example/"]:
        with pytest.raises(ValueError):
            normalize_url(bad)
    marks = 0
    for lo, hi in [(0x20D0, 0x20FF), (0x1D100, 0x1D1FF), (0x1D200, 0x1D24F)]:
        for cp in range(lo, hi + 1):
            if unicodedata.category(chr(cp)) not in ("Mn", "Mc", "Me"):
                continue
            marks += 1
            with pytest.raises(ValueError):
                normalize_url("https://a" + chr(cp) + ".example/")
    assert marks >= 59
