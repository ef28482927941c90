"""normalize_url: the Go SDK's NormalizeURL, byte for byte, so a page is one
item of work (one work_id) whichever SDK derived its key. The rules are
docs/keys.md's; clientsdk/testdata/normalizeurl_vectors.json holds cases
both SDKs check, and the Go SDK's differential test runs this module against
Go on thousands of generated URLs."""
from __future__ import annotations

import ipaddress
import re
import unicodedata

import idna

__all__ = ["normalize_url"]

_TRACKING = {b"gclid", b"dclid", b"gbraid", b"wbraid", b"fbclid", b"msclkid", b"yclid", b"igshid",
             b"mc_cid", b"mc_eid", b"_hsenc", b"_hsmi"}
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_ALPHA = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_UNRESERVED = frozenset(_ALPHA + b"0123456789-._~")
_SUB_DELIMS = frozenset(b"!$&'()*+,;=")
_USERINFO = _UNRESERVED | _SUB_DELIMS | frozenset(b":")
_PATH = _UNRESERVED | _SUB_DELIMS | frozenset(b":@/")
_HOST_ASCII = _UNRESERVED | _SUB_DELIMS
_HEX = frozenset(b"0123456789abcdefABCDEF")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_LETTER_DIGIT = {"Ll", "Lu", "Lo", "Lm", "Mn", "Mc", "Nd"}


def normalize_url(raw: str) -> str:
    """One spelling of an absolute URL (docs/keys.md): scheme and host in
    one form (an internationalised host as its lower-case A-label), a
    default port dropped, percent-encoding normalised per RFC 3986 §6.2.2
    (%2F is never decoded), the fragment dropped, tracking parameters
    (utm_*, gclid, fbclid, ...) removed and the other query parameters
    sorted by name, none ever lost. Raises ValueError where Go's
    NormalizeURL returns an error: no scheme or host, a control character,
    a lone surrogate, an invalid host or port."""
    try:
        return _normalize(raw)
    except ValueError as e:
        raise ValueError(f"oncejob: normalize_url {raw!r}: {e}") from None


def _normalize(raw: str) -> str:
    s = raw.strip(" \t\n\v\f\r")
    m = _SURROGATE.search(s)
    if m:
        raise ValueError("lone surrogate: not valid Unicode")
    m = _CONTROL.search(s)
    if m:
        raise ValueError(f"control character U+{ord(m.group()):04X} at byte {len(s[:m.start()].encode('utf-8'))}")
    s = s.partition("#")[0]
    scheme, colon, rest = s.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme) or not rest.startswith("//"):
        raise ValueError("not an absolute URL (scheme://host...)")
    scheme = scheme.lower()
    rest = rest[2:]
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, rest = rest[:end], rest[end:]
    path, _, query = rest.partition("?")

    out = [scheme, "://"]
    userinfo, at, hostport = authority.rpartition("@")
    if at and userinfo:
        out.append(_normalize_percent(userinfo, _USERINFO) + "@")
    host, port = _split_host_port(hostport)
    out.append(_normalize_host(host))
    if port and _DEFAULT_PORTS.get(scheme) != port:
        out.append(":" + port)
    out.append(_normalize_percent(path or "/", _PATH))
    q = _normalize_query(query)
    if q:
        out.append("?" + q)
    return "".join(out)


def _split_host_port(hostport: str) -> tuple[str, str]:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise ValueError("missing ']' in host")
        host, port = hostport[:end + 1], hostport[end + 1:]
        if port and port[0] != ":":
            raise ValueError("junk after ']' in host")
        port = port[1:]
    else:
        host, _, port = hostport.partition(":")
    if not port:
        return host, ""
    if not all("0" <= c <= "9" for c in port):
        raise ValueError(f"invalid port {port!r}")
    port = port.lstrip("0")
    if len(port) > 5 or (port and int(port) > 65535):
        raise ValueError(f"port {port} is above 65535")
    return host, port or "0"


def _normalize_host(host: str) -> str:
    if host.startswith("["):
        inner = host[1:-1]
        try:
            if "%" in inner:
                raise ValueError
            addr = ipaddress.IPv6Address(inner)
        except ValueError:
            raise ValueError(f"invalid IPv6 literal {host}") from None
        # RFC 5952 text, an IPv4-mapped address as ::ffff:a.b.c.d (Go's
        # netip writes it so; Python before 3.13 writes hex).
        if addr.ipv4_mapped is not None:
            return f"[::ffff:{addr.ipv4_mapped}]"
        return f"[{addr.compressed}]"
    decoded = _percent_decode(host)
    if decoded is None:
        raise ValueError("invalid percent-encoding in host")
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("host is not UTF-8") from None
    if not text:
        raise ValueError("not an absolute URL (no host)")
    return ".".join(_normalize_label(label) for label in text.translate(_DOTS).split("."))


def _normalize_label(label: str) -> str:
    if label.isascii():
        for c in label.encode("ascii"):
            if c not in _HOST_ASCII:
                raise ValueError(f"invalid character {chr(c)!r} in host")
        return label.lower()
    try:
        mapped = idna.uts46_remap(label, std3_rules=True, transitional=False)
        if mapped.startswith("xn--"):
            # UTS #46 decodes it as an A-label: ASCII, valid punycode, not
            # all ASCII once decoded; then it is that U-label (docs/keys.md).
            if not mapped.isascii():
                raise ValueError(f"host label {label!r}: starts with xn-- but is not ASCII")
            try:
                decoded = mapped[4:].encode("ascii").decode("punycode")
            except UnicodeError:
                raise ValueError(f"host label {label!r}: xn-- but not punycode") from None
            if not decoded or decoded.isascii():
                raise ValueError(f"host label {label!r}: xn-- but punycode of ASCII")
            a_label = _normalize_label(decoded)
            if a_label != mapped:
                raise ValueError(f"host label {label!r}: {mapped} is not the A-label of what it decodes to ({a_label})")
            return a_label
        for i, c in enumerate(mapped):
            if c in "\u200c\u200d" and (i == 0 or ord(mapped[i - 1]) not in _VIRAMAS):
                raise ValueError(f"host label {label!r}: U+{ord(c):04X} is allowed only right after a virama")
        for c in mapped:
            if not _idna_letter_digit(c) and c not in "\u200c\u200d":  # joiners: above
                raise ValueError(f"host label {label!r}: U+{ord(c):04X} is not a letter, mark or digit (IDNA2008)")
        return idna.encode(mapped, uts46=False).decode("ascii")
    except idna.IDNAError as e:
        raise ValueError(f"host label {label!r}: {e}") from None


# Canonical_Combining_Class 9 (Virama) in Unicode 14, as Go's viramas: the
# one place a joiner (ZWJ, ZWNJ) may stand in a host label (docs/keys.md).
_VIRAMAS = frozenset([
    0x094D, 0x09CD, 0x0A4D, 0x0ACD, 0x0B4D, 0x0BCD, 0x0C4D, 0x0CCD, 0x0D3B,
    0x0D3C, 0x0D4D, 0x0DCA, 0x0E3A, 0x0EBA, 0x0F84, 0x1039, 0x103A, 0x1714,
    0x1715, 0x1734, 0x17D2, 0x1A60, 0x1B44, 0x1BAA, 0x1BAB, 0x1BF2, 0x1BF3,
    0x2D7F, 0xA806, 0xA82C, 0xA8C4, 0xA953, 0xA9C0, 0xAAF6, 0xABED, 0x10A3F,
    0x11046, 0x11070, 0x1107F, 0x110B9, 0x11133, 0x11134, 0x111C0, 0x11235, 0x112EA,
    0x1134D, 0x11442, 0x114C2, 0x115BF, 0x1163F, 0x116B6, 0x1172B, 0x11839, 0x1193D,
    0x1193E, 0x119E0, 0x11A34, 0x11A47, 0x11A99, 0x11C3F, 0x11D44, 0x11D45, 0x11D97,
])


def _idna_letter_digit(c: str) -> bool:
    # Go's idnaLetterDigit: RFC 5892's LetterDigits and '-', less the
    # exceptions IDNA2008 disallows, plus those it allows.
    o = ord(c)
    if c == "-" or o in (0x06FD, 0x06FE, 0x0F0B, 0x3007):
        return True
    if o in (0x0640, 0x07FA, 0x302E, 0x302F, 0x303B) or 0x3031 <= o <= 0x3035 \
            or 0x1100 <= o <= 0x11FF or 0xA960 <= o <= 0xA97F or 0xD7B0 <= o <= 0xD7FF \
            or 0x20D0 <= o <= 0x20FF or 0x1D100 <= o <= 0x1D1FF or 0x1D200 <= o <= 0x1D24F:
        return False
    return unicodedata.category(c) in _LETTER_DIGIT


def _normalize_query(query: str) -> str:
    pairs = []
    for seg in query.split("&"):
        if not seg:
            continue
        name, _, value = seg.partition("=")
        n, v = _form_decode(name), _form_decode(value)
        low = n.lower()  # bytes.lower is ASCII only, as Go's for these names
        if low.startswith(b"utm_") or low in _TRACKING:
            continue
        pairs.append((n, v))
    pairs.sort(key=lambda p: p[0])  # stable: one name's values keep their order
    return "&".join(_form_encode(n) + "=" + _form_encode(v) for n, v in pairs)


def _form_decode(s: str) -> bytes:
    b = s.encode("utf-8")
    out = bytearray()
    i = 0
    while i < len(b):
        c = b[i]
        if c == 0x2B:  # '+'
            out.append(0x20)
        elif c == 0x25 and i + 2 < len(b) and b[i + 1] in _HEX and b[i + 2] in _HEX:
            out.append(int(b[i + 1:i + 3], 16))
            i += 2
        else:
            out.append(c)
        i += 1
    return bytes(out)


def _form_encode(b: bytes) -> str:
    return "".join(chr(c) if c in _UNRESERVED else "+" if c == 0x20 else f"%{c:02X}" for c in b)


def _normalize_percent(s: str, allowed: frozenset) -> str:
    b = s.encode("utf-8")
    out = []
    i = 0
    while i < len(b):
        c = b[i]
        if c == 0x25 and i + 2 < len(b) and b[i + 1] in _HEX and b[i + 2] in _HEX:
            d = int(b[i + 1:i + 3], 16)
            out.append(chr(d) if d in _UNRESERVED else f"%{d:02X}")
            i += 3
            continue
        out.append(chr(c) if c in allowed else f"%{c:02X}")
        i += 1
    return "".join(out)


def _percent_decode(s: str) -> bytes | None:
    b = s.encode("utf-8")
    out = bytearray()
    i = 0
    while i < len(b):
        if b[i] != 0x25:
            out.append(b[i])
            i += 1
            continue
        if i + 2 >= len(b) or b[i + 1] not in _HEX or b[i + 2] not in _HEX:
            return None
        out.append(int(b[i + 1:i + 3], 16))
        i += 3
    return bytes(out)
