"""WorkID: the idempotency key of one unit of work, bit for bit as Go's.

work_id(kind, version, payload, drop) is the lower-case hex sha256 of

    kind + ":" + str(version) + ":" + canonical JSON of payload

after removing the members the RFC 6901 JSON Pointers in ``drop`` name. The
canonical JSON is the server's (Go package ``jobkey``, ``jobkey.Canonical``),
reproduced here exactly; docs/architecture.md writes the algorithm out, and
clientsdk/testdata/workid_vectors.json holds the cases both languages pass:

* objects: members sorted by the UTF-8 bytes of their names, names as given
  (never trimmed), written ``{"a":1,"b":2}`` with no white space;
* strings: trimmed of Unicode White_Space at both ends (Go's
  ``strings.TrimSpace``: not U+200B, U+FEFF or U+001C-U+001F), then escaped
  as Go's encoding/json does without HTML escaping: ``\\"`` ``\\\\`` ``\\b``
  ``\\f`` ``\\n`` ``\\r`` ``\\t``, other characters below U+0020 and U+2028,
  U+2029 as ``\\u00xx`` / ``\\u2028`` (lower-case hex), everything else as
  UTF-8; a string or name with a lone surrogate (not a Unicode scalar
  value: a Go string cannot carry it) is refused;
* numbers: as IEEE 754 doubles (an integer is rounded to the nearest
  double); 0 and -0 as ``0``; an integral value below 2**53 in magnitude as
  plain digits; anything else as Go's ``strconv.FormatFloat(f, 'g', -1,
  64)``: the shortest digits that round-trip, in exponent form
  (``1.2345675e+06``, ``1e-05``, at least two exponent digits) when the
  decimal exponent is below -4 or at least 6, else plain; NaN and infinities
  are refused;
* arrays in order; true, false, null as such;
* arrays and objects nested deeper than MAX_DEPTH (128) are refused, before
  anything recurses (docs/keys.md).
"""
from __future__ import annotations

import copy
import hashlib
import math
import re
from typing import Any, Iterable

__all__ = ["work_id", "submit_key", "canonical_json", "MAX_DEPTH"]

# Go: clientsdk.MaxWorkIDDepth.
MAX_DEPTH = 128

# Go's unicode.IsSpace, which strings.TrimSpace trims.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_KIND = re.compile(r"[A-Za-z0-9._/-]{1,128}")
_INDEX = re.compile(r"0|[1-9][0-9]*")
_SURROGATE = re.compile("[\ud800-\udfff]")


def work_id(kind: str, version: int, payload: Any, drop: Iterable[str] = ()) -> str:
    """Returns the WorkID of payload; see the module doc.

    kind: 1-128 characters from A-Z a-z 0-9 . _ / -; version: an int >= 1.
    payload: JSON-shaped Python values (dict with str keys, list, tuple,
    str, int, float, bool, None). drop: JSON Pointers of volatile members,
    such as "/received_at"; a pointer that names nothing is ignored.
    Raises ValueError or TypeError where Go's WorkID returns an error.
    """
    return hashlib.sha256(_preimage(kind, version, payload, drop)).hexdigest()


def submit_key(pipeline: str, document: str | bytes, *, media_type: str = "", name: str = "",
               model_profile: str = "", params: dict | None = None) -> str:
    """Returns the idempotency key the SDKs derive for a submission: the
    WorkID of kind "oncejob.submit", version 1, over the fields the server
    fingerprints, as sent (Go: clientsdk.SubmitKey)."""
    data = document.encode("utf-8") if isinstance(document, str) else bytes(document)
    return work_id("oncejob.submit", 1, {
        "pipeline": pipeline,
        "document_sha256": hashlib.sha256(data).hexdigest(),
        "media_type": media_type,
        "document_name": name,
        "model_profile": model_profile,
        "params": dict(params or {}),
    })


def canonical_json(value: Any) -> str:
    """Returns the server's canonical JSON of value (see the module doc)."""
    _check(value)
    out: list[str] = []
    _write(out, value)
    return "".join(out)


def _preimage(kind: str, version: int, payload: Any, drop: Iterable[str]) -> bytes:
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise ValueError(f"WorkID kind {kind!r}: 1-128 characters from A-Z a-z 0-9 . _ / -")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"WorkID version must be an int >= 1, got {version!r}")
    pointers = [_parse_pointer(p) for p in drop]
    _check(payload)
    if pointers:
        payload = copy.deepcopy(payload)
        for tokens in pointers:
            payload = _remove_at(payload, tokens)
    return f"{kind}:{version}:{canonical_json(payload)}".encode("utf-8")


def _check(value: Any) -> None:
    """Refuses, without recursing, nesting deeper than MAX_DEPTH and lone
    surrogates, in names and strings."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            _check_str(v)
        elif isinstance(v, (dict, list, tuple)):
            if depth + 1 > MAX_DEPTH:
                raise ValueError(f"arrays and objects nest deeper than {MAX_DEPTH}")
            if isinstance(v, dict):
                for k in v:
                    if isinstance(k, str):
                        _check_str(k)
                v = v.values()
            stack.extend((e, depth + 1) for e in v)


def _check_str(s: str) -> None:
    m = _SURROGATE.search(s)
    if m:
        raise ValueError(f"a string holds a lone surrogate \\u{ord(m.group()):04x}: not valid Unicode")


def _parse_pointer(p: str) -> list[str]:
    if not isinstance(p, str) or not p.startswith("/"):
        raise ValueError(f"drop pointer {p!r} must start with '/' (RFC 6901)")
    tokens = p[1:].split("/")
    for t in tokens:
        for i, ch in enumerate(t):
            if ch == "~" and (i + 1 == len(t) or t[i + 1] not in "01"):
                raise ValueError(f"drop pointer {p!r}: '~' must be followed by 0 or 1")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _remove_at(v: Any, tokens: list[str]) -> Any:
    head, rest = tokens[0], tokens[1:]
    if isinstance(v, dict):
        if head in v:
            if rest:
                v[head] = _remove_at(v[head], rest)
            else:
                del v[head]
    elif isinstance(v, (list, tuple)):
        v = list(v)
        if _INDEX.fullmatch(head) and int(head) < len(v):
            i = int(head)
            if rest:
                v[i] = _remove_at(v[i], rest)
            else:
                del v[i]
    return v


def _write(out: list[str], v: Any) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        _write_string(out, v.strip(_GO_SPACE))
    elif isinstance(v, dict):
        members = {}
        for k, e in v.items():
            if not isinstance(k, str):
                raise TypeError(f"object keys must be str, got {type(k).__name__}")
            members[k] = e
        out.append("{")
        for i, name in enumerate(sorted(members, key=lambda s: s.encode("utf-8"))):
            if i:
                out.append(",")
            _write_string(out, name)
            out.append(":")
            _write(out, members[name])
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, e in enumerate(v):
            if i:
                out.append(",")
            _write(out, e)
        out.append("]")
    elif isinstance(v, (int, float)):
        out.append(_format_number(v))
    else:
        raise TypeError(f"cannot canonicalise {type(v).__name__}")


def _write_string(out: list[str], s: str) -> None:
    out.append('"')
    for c in s:
        if c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif c < " " or c in "\u2028\u2029":
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    out.append('"')


def _format_number(n: int | float) -> str:
    try:
        f = float(n)
    except OverflowError:
        raise ValueError(f"number {n} is out of range") from None
    if math.isnan(f) or math.isinf(f):
        raise ValueError(f"number {f} has no JSON form")
    if f == 0:
        return "0"
    if f == math.trunc(f) and abs(f) < 2**53:
        return str(int(f))
    return _format_g(f)


def _format_g(f: float) -> str:
    """Go's strconv.FormatFloat(f, 'g', -1, 64) for finite, non-zero f."""
    sign = "-" if f < 0 else ""
    digits, dp = _shortest(abs(f))  # abs(f) == 0.<digits> * 10**dp
    nd, exp = len(digits), dp - 1
    if exp < -4 or exp >= 6:
        mant = digits[0] + ("." + digits[1:] if nd > 1 else "")
        return f"{sign}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    integer = digits[:dp].ljust(dp, "0") if dp > 0 else "0"
    frac = "".join(digits[j] if 0 <= j < nd else "0" for j in range(dp, dp + max(nd - dp, 0)))
    return sign + integer + ("." + frac if frac else "")


def _shortest(x: float) -> tuple[str, int]:
    """The shortest round-trip decimal digits of x > 0 (repr's, the same
    digits as Go's) and the position of the decimal point."""
    mant, _, e = repr(x).partition("e")
    whole, _, frac = mant.partition(".")
    digits = whole + frac
    dp = len(whole) + (int(e) if e else 0)
    stripped = digits.lstrip("0")
    dp -= len(digits) - len(stripped)
    return stripped.rstrip("0"), dp
