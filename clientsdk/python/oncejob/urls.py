"""normalize_url: the Go SDK's NormalizeURL, so a page is one item of work
(one work_id) whichever SDK derived its key. Checked against the vectors in
clientsdk/testdata/normalizeurl_vectors.json, which the Go SDK checks too."""
from __future__ import annotations

import string
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

__all__ = ["normalize_url"]

_TRACKING = {"gclid", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid", "igshid",
             "mc_cid", "mc_eid", "_hsenc", "_hsmi"}
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_HOST_CHARS = set(string.ascii_letters + string.digits + "-._~!$&'()*+,;=%")
# What Go keeps as written in a path (a valid escaping); anything else is
# percent-encoded as UTF-8.
_PATH_SAFE = "/:@!$&'()*+,;=~-._%"


def normalize_url(raw: str) -> str:
    """One spelling of an absolute URL: scheme and host lower-cased, a
    default port (80 for http, 443 for https) dropped, an empty path made
    "/", the fragment dropped, tracking parameters (utm_*, gclid, fbclid,
    ...) removed, and the query sorted by name (one name's values keep their
    order). The path and user info are kept. Raises ValueError on a URL
    without a scheme or host."""
    parts = urlsplit(raw.strip())
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"oncejob: normalize_url: {raw!r} is not an absolute URL")
    scheme = parts.scheme.lower()
    userinfo, _, hostport = parts.netloc.rpartition("@")
    host, port = _split_host_port(hostport, raw)
    if not host:
        raise ValueError(f"oncejob: normalize_url: {raw!r} is not an absolute URL")
    host = host.lower()
    netloc = (userinfo + "@" if userinfo else "") + host
    if port and _DEFAULT_PORTS.get(scheme) != port:
        netloc += ":" + port
    path = quote(parts.path, safe=_PATH_SAFE) or "/"
    grouped: dict[str, list[str]] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        low = name.lower()
        if low.startswith("utm_") or low in _TRACKING:
            continue
        grouped.setdefault(name, []).append(value)
    query = "&".join(f"{quote_plus(k, safe='')}={quote_plus(v, safe='')}"
                     for k in sorted(grouped) for v in grouped[k])
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def _split_host_port(hostport: str, raw: str) -> tuple[str, str]:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise ValueError(f"oncejob: normalize_url: {raw!r}: missing ']' in host")
        host, rest = hostport[:end + 1], hostport[end + 1:]
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = hostport.partition(":")
        if any(c not in _HOST_CHARS for c in host):
            raise ValueError(f"oncejob: normalize_url: {raw!r}: invalid character in host")
    if port and not port.isdigit():
        raise ValueError(f"oncejob: normalize_url: {raw!r}: invalid port")
    return host, port
