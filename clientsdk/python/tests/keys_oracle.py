"""The Python side of the Go SDK's differential key test
(clientsdk/keys_differential_ext_test.go): reads one JSON request a line on
stdin, answers one JSON line on stdout, {"out": ...} or {"err": ...}, with
the SDK's normalize_url, work_id and submit_key. It imports the two modules
alone, so it needs Python and idna, not grpc.

A request's strings carry a Go string's invalid UTF-8 bytes as lone
surrogates U+DC80-U+DCFF (Python's surrogateescape), which is how such a
byte reaches a Python str."""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oncejob"))

import urls  # noqa: E402
import workid  # noqa: E402


def parse_json(text):
    # The payload is data, not the SDK: deep nesting and integers of any
    # length are parsed here as Go's decoder parses them, so that work_id
    # itself meets them (its own bounds must refuse them, not crash).
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 30000))
    old_digits = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else None
    if old_digits is not None:
        sys.set_int_max_str_digits(0)
    try:
        return json.loads(text)
    finally:
        sys.setrecursionlimit(old)
        if old_digits is not None:
            sys.set_int_max_str_digits(old_digits)


def answer(req):
    op = req["op"]
    if op == "url":
        return urls.normalize_url(req["in"])
    if op == "workid":
        return workid.work_id(req["kind"], req["version"], parse_json(req["payload"]), req.get("drop") or [])
    if op == "submit":
        params = parse_json(req["params"])
        if not isinstance(params, dict):
            raise ValueError("params is not an object")
        return workid.submit_key(req["pipeline"], req["text"], media_type=req["media_type"],
                                 name=req["name"], model_profile=req["model_profile"], params=params)
    raise ValueError(f"unknown op {op!r}")


def main():
    out = sys.stdout
    for line in sys.stdin:
        try:
            resp = {"out": answer(json.loads(line))}
        except (ValueError, TypeError) as e:  # what the SDK raises on bad input
            resp = {"err": f"{type(e).__name__}: {e}"}
        except Exception as e:  # a crash (RecursionError...): never an answer
            resp = {"err": f"CRASH {type(e).__name__}: {e}", "crash": True}
        out.write(json.dumps(resp) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
