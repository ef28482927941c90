"""work_id and submit_key against the vectors the Go SDK checks too."""
import base64
import json
import pathlib
import random
import struct

import pytest

from oncejob import submit_key, work_id
from oncejob.workid import _preimage, canonical_json

VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[2] / "testdata" / "workid_vectors.json").read_text("utf-8"))


def test_the_vector_file_is_large_enough():
    assert len(VECTORS["work_id"]) >= 50


@pytest.mark.parametrize("case", VECTORS["work_id"], ids=[c["name"] for c in VECTORS["work_id"]])
def test_work_id_matches_go(case):
    payload = case["payload"]
    drop = case.get("drop", [])
    if case.get("error"):
        with pytest.raises((ValueError, TypeError)):
            work_id(case["kind"], case["version"], json.loads(payload), drop)
        return
    value = json.loads(payload)
    pre = _preimage(case["kind"], case["version"], value, drop).decode("utf-8")
    assert pre == f'{case["kind"]}:{case["version"]}:{case["canonical"]}'
    assert work_id(case["kind"], case["version"], value, drop) == case["work_id"]


@pytest.mark.parametrize("case", VECTORS["submit_key"], ids=[c["name"] for c in VECTORS["submit_key"]])
def test_submit_key_matches_go(case):
    document = base64.b64decode(case["data_base64"]) if case.get("data_base64") else case["text"]
    key = submit_key(case["pipeline"], document, media_type=case["media_type"], name=case["document_name"],
                     model_profile=case["model_profile"], params=json.loads(case["params"]))
    assert key == case["key"]


def test_payload_is_not_mutated_by_drop():
    payload = {"id": "a", "meta": {"trace": "x"}, "items": [1, 2]}
    before = json.dumps(payload)
    work_id("k", 1, payload, ["/meta/trace", "/items/0"])
    assert json.dumps(payload) == before


def test_python_values_match_json_text():
    # A dict built in Python is the same intent as the JSON text of it.
    assert work_id("k", 1, {"b": 1, "a": (1.0, "x ")}) == work_id("k", 1, json.loads('{"a":[1,"x"],"b":1.0}'))
    assert canonical_json(10**30) == "1e+30"
    assert canonical_json(-0.0) == "0"


def test_numbers_round_trip_like_go_shortest_form():
    # Every canonical number parses back to the same double, and the
    # exponent rule holds; Go's exact output is checked by the vectors and,
    # on random doubles, by cmd/oncejob's python_sdk_e2e_test.go.
    rng = random.Random(7)
    for _ in range(20000):
        f = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if f != f or f in (float("inf"), float("-inf")):
            continue
        s = canonical_json(f)
        assert float(s) == f or (f == 0 and s == "0")


def test_run_key_with_provider_batch_matches_go():
    # The Go SDK's TestRunKey and TestRunKeyProviderBatch pin the same values.
    from oncejob import run_key
    from oncejob._core import create_run_request
    assert run_key("nightly", "summarize") == "4a0fb4ae1b214ea8fc5e9eb0a1784ec727fc18d9eef3e4f0ebaadcd8680b040e"
    assert run_key("nightly", "summarize", provider_batch=True) == \
        "a804d0838e50841de376ea6fa1ea72e7e186994bcd2f13dd1fc105f193fd9b1d"
    assert create_run_request("nightly", "summarize", "", None, None, True).provider_batch
    assert not create_run_request("nightly", "summarize", "", None, None).provider_batch
