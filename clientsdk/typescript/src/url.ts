// normalizeUrl: one spelling of an absolute URL, byte for byte as the Go
// SDK's NormalizeURL and the Python SDK's normalize_url (docs/keys.md,
// "NormalizeURL", is the spec). A module of its own ("@oncejob/client/url")
// because its IDNA tables (tr46, UTS #46) weigh more than the rest of the
// client: a browser app that never normalises a URL does not load them.

import { toASCII, toUnicode } from "tr46";

import { KeyError } from "./keys.js";

const TRACKING = new Set(["gclid", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid", "igshid", "mc_cid", "mc_eid", "_hsenc", "_hsmi"]);
const DEFAULT_PORTS: Record<string, string> = { http: "80", https: "443" };
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * normalizeUrl returns one spelling of an absolute URL, so that the same
 * page is one intent (one WorkID) however a crawler found it: the scheme
 * and host lower-cased, the host as its A-label (UTS #46, non-transitional,
 * STD3 rules, IDNA2008 letters, marks and digits), a default or empty port
 * dropped, percent-escapes normalised per RFC 3986 §6.2.2 (%2F kept),
 * the fragment dropped, the query's pairs form-decoded, re-encoded, rid of
 * tracking parameters and sorted by name. Throws KeyError for what Go's
 * NormalizeURL refuses.
 */
export function normalizeUrl(raw: string): string {
  try {
    return normalize(raw);
  } catch (e) {
    if (e instanceof UrlError) throw new KeyError(`oncejob: NormalizeURL ${JSON.stringify(raw)}: ${e.message}`);
    throw e;
  }
}

class UrlError extends Error {}

function normalize(raw: string): string {
  const s0 = raw.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, "");
  if (LONE_SURROGATE.test(s0)) throw new UrlError("invalid UTF-8");
  const ctl = /[\u0000-\u001f\u007f-\u009f]/.exec(s0);
  if (ctl) throw new UrlError(`control character U+${ctl[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`);
  // From here on, s is the UTF-8 bytes of the URL, one character a byte,
  // so every step is the Go code's, on the same bytes.
  let s = bytesString(new TextEncoder().encode(s0));
  s = cut(s, "#")[0];
  const [scheme0, rest0, ok] = cut(s, ":");
  if (!ok || !validScheme(scheme0) || !rest0.startsWith("//")) throw new UrlError("not an absolute URL (scheme://host...)");
  const scheme = scheme0.toLowerCase();
  let rest = rest0.slice(2);
  let end = rest.search(/[/?]/);
  if (end < 0) end = rest.length;
  const authority = rest.slice(0, end);
  rest = rest.slice(end);
  const [path0, query] = cut(rest, "?");

  let out = scheme + "://";
  let hostport = authority;
  const at = authority.lastIndexOf("@");
  if (at >= 0) {
    hostport = authority.slice(at + 1);
    const userinfo = authority.slice(0, at);
    if (userinfo !== "") out += normalizePercent(userinfo, ":") + "@";
  }
  const [host0, port] = splitHostPort(hostport);
  out += normalizeHost(host0);
  if (port !== "" && DEFAULT_PORTS[scheme] !== port) out += ":" + port;
  out += normalizePercent(path0 === "" ? "/" : path0, ":@/");
  const q = normalizeQuery(query);
  if (q !== "") out += "?" + q;
  return out;
}

function cut(s: string, sep: string): [string, string, boolean] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, "", false] : [s.slice(0, i), s.slice(i + sep.length), true];
}

function validScheme(s: string): boolean {
  return /^[A-Za-z][A-Za-z0-9+.-]*$/.test(s);
}

function splitHostPort(hostport: string): [string, string] {
  let host: string;
  let port: string;
  if (hostport.startsWith("[")) {
    const end = hostport.indexOf("]");
    if (end < 0) throw new UrlError("missing ']' in host");
    host = hostport.slice(0, end + 1);
    port = hostport.slice(end + 1);
    if (port !== "" && port[0] !== ":") throw new UrlError("junk after ']' in host");
    if (port.startsWith(":")) port = port.slice(1);
  } else {
    [host, port] = cut(hostport, ":");
  }
  if (port === "") return [host, ""];
  if (!/^[0-9]+$/.test(port)) throw new UrlError(`invalid port ${JSON.stringify(port)}`);
  port = port.replace(/^0+/, "");
  if (port.length > 5 || Number(port) > 65535) throw new UrlError(`port ${port} is above 65535`);
  return [host, port === "" ? "0" : port];
}

// The IDNA options of the Go SDK's profile: UTS #46 non-transitional, STD3
// rules, joiners, bidi and DNS length; hyphens checked apart, by character.
const IDNA = {
  checkBidi: true,
  checkHyphens: false,
  checkJoiners: true,
  useSTD3ASCIIRules: true,
  transitionalProcessing: false,
  verifyDNSLength: true,
  ignoreInvalidPunycode: false,
};

function normalizeHost(host: string): string {
  if (host.startsWith("[")) return "[" + ipv6(host.slice(1, -1)) + "]";
  const decoded = percentDecode(host);
  if (decoded === null) throw new UrlError("invalid percent-encoding in host");
  let h: string;
  try {
    h = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(stringBytes(decoded));
  } catch {
    throw new UrlError("host is not UTF-8");
  }
  if (h === "") throw new UrlError("not an absolute URL (no host)");
  return h.replace(/[\u3002\uff0e\uff61]/g, ".").split(".").map(normalizeLabel).join(".");
}

// The UTS #46 mapping alone (non-transitional, STD3), for uts46Map.
const MAPPING = { useSTD3ASCIIRules: true, transitionalProcessing: false };

// uts46Map is label after UTS #46's mapping, before any label is decoded as
// punycode: a digit goes first, which no mapping composes with, so the
// label does not start with "xn--" as tr46 looks at it (the Go SDK's
// uts46Map).
function uts46Map(label: string): string {
  return toUnicode("0" + label, MAPPING).domain.slice(1);
}

function normalizeLabel(label: string): string {
  if (/^[\x00-\x7f]*$/.test(label)) {
    for (const c of label) {
      if (!isUnreserved(c) && !isSubDelim(c)) throw new UrlError(`invalid character ${JSON.stringify(c)} in host`);
    }
    return label.toLowerCase();
  }
  const bad = (why: string): never => {
    throw new UrlError(`host label ${JSON.stringify(label)}: ${why}`);
  };
  // U+1E9E (capital sharp s) is "ss" in the UTS #46 tables of Unicode 15.0
  // and before, which Go's x/net/idna and Python's idna have, and in
  // docs/keys.md; Unicode 15.1's (tr46's) map it to ß.
  const l = label.replaceAll("\u1e9e", "ss");
  // Likewise, what Unicode 15.1 and 16 newly map or ignore, the older
  // tables disallow (TestKeysEveryCodePointAgreesTypeScript finds them).
  const newer = NEWER_UTS46.exec(l);
  if (newer) bad(`U+${newer[0].codePointAt(0)!.toString(16).toUpperCase()} is disallowed by UTS #46 before Unicode 15.1`);
  // A label that maps to "xn--..." is an A-label spelled otherwise: it must
  // be ASCII and the A-label of what it decodes to (docs/keys.md, step 2).
  const mapped = uts46Map(l);
  if (mapped.startsWith("xn--") && !/^[\x00-\x7f]*$/.test(mapped)) bad("starts with xn-- but is not ASCII");
  const a = toASCII(l, IDNA);
  if (a === null) return bad("not valid under UTS #46");
  if (mapped.startsWith("xn--") && a !== mapped) bad(`${mapped} is not the A-label of what it decodes to (${a})`);
  const { domain: u, error } = toUnicode(a, IDNA);
  if (error) bad("not valid under UTS #46");
  const r = [...u];
  if (r[0] === "-" || r[r.length - 1] === "-" || (r.length >= 4 && r[2] === "-" && r[3] === "-")) {
    bad("a hyphen at its start or end, or in its 3rd and 4th places");
  }
  if (/[\u0660-\u0669]/.test(u) && /[\u06f0-\u06f9]/.test(u)) bad("mixes Arabic-Indic and extended Arabic-Indic digits");
  let prev = -1;
  for (const c of r) {
    const cp = c.codePointAt(0)!;
    if ((cp === ZWJ || cp === ZWNJ) && !VIRAMAS.has(prev)) bad(`U+${cp.toString(16).toUpperCase()} is allowed only right after a virama`);
    if (!idnaLetterDigit(cp) && cp !== ZWJ && cp !== ZWNJ) bad(`U+${cp.toString(16).toUpperCase()} is not a letter, mark or digit (IDNA2008)`);
    prev = cp;
  }
  return a;
}

// NEWER_UTS46 are the code points of Unicode 14 that UTS #46 disallowed up
// to Unicode 15.0 (the tables of Go's x/net/idna and Python's idna) and
// maps or ignores since 15.1 (tr46's): Cyrillic palochka, Georgian capitals,
// two letterlike symbols, fillers and invisible operators, five CJK
// compatibility ideographs.
const NEWER_UTS46 = /[\u04c0\u10a0-\u10c5\u115f\u1160\u17b4\u17b5\u180e\u2061-\u2063\u206a-\u206f\u2132\u2183\u3164\uffa0\u{1d173}-\u{1d17a}\u{2f868}\u{2f874}\u{2f91f}\u{2f95f}\u{2f9bf}]/u;

// The joiners: allowed in a U-label right after a virama, refused anywhere
// else (docs/keys.md, step 3).
const ZWNJ = 0x200c;
const ZWJ = 0x200d;

// VIRAMAS are the code points of Canonical_Combining_Class 9 in Unicode 14,
// as docs/keys.md lists them, so that every SDK holds the same set.
const VIRAMAS = new Set([
  0x094d, 0x09cd, 0x0a4d, 0x0acd, 0x0b4d, 0x0bcd, 0x0c4d, 0x0ccd, 0x0d3b, 0x0d3c, 0x0d4d, 0x0dca, 0x0e3a, 0x0eba, 0x0f84, 0x1039,
  0x103a, 0x1714, 0x1715, 0x1734, 0x17d2, 0x1a60, 0x1b44, 0x1baa, 0x1bab, 0x1bf2, 0x1bf3, 0x2d7f, 0xa806, 0xa82c, 0xa8c4, 0xa953,
  0xa9c0, 0xaaf6, 0xabed, 0x10a3f, 0x11046, 0x11070, 0x1107f, 0x110b9, 0x11133, 0x11134, 0x111c0, 0x11235, 0x112ea, 0x1134d,
  0x11442, 0x114c2, 0x115bf, 0x1163f, 0x116b6, 0x1172b, 0x11839, 0x1193d, 0x1193e, 0x119e0, 0x11a34, 0x11a47, 0x11a99, 0x11c3f,
  0x11d44, 0x11d45, 0x11d97,
]);

const LETTER_DIGIT = /^[\p{Ll}\p{Lu}\p{Lo}\p{Lm}\p{Mn}\p{Mc}\p{Nd}]$/u;

// idnaLetterDigit: RFC 5892's LetterDigits and '-', less the exceptions it
// disallows (and old Hangul jamo), plus those it allows.
function idnaLetterDigit(r: number): boolean {
  if (r === 0x2d || r === 0x06fd || r === 0x06fe || r === 0x0f0b || r === 0x3007) return true;
  if (r === 0x0640 || r === 0x07fa || r === 0x302e || r === 0x302f || (r >= 0x3031 && r <= 0x3035) || r === 0x303b) return false;
  if ((r >= 0x1100 && r <= 0x11ff) || (r >= 0xa960 && r <= 0xa97f) || (r >= 0xd7b0 && r <= 0xd7ff)) return false;
  // IDNA2008's IgnorableBlocks: Combining Diacritical Marks for Symbols,
  // Musical Symbols, Ancient Greek Musical Notation.
  if ((r >= 0x20d0 && r <= 0x20ff) || (r >= 0x1d100 && r <= 0x1d1ff) || (r >= 0x1d200 && r <= 0x1d24f)) return false;
  return LETTER_DIGIT.test(String.fromCodePoint(r));
}

// ipv6 parses an IPv6 address (no zone, IPv4 tail allowed) and writes it in
// RFC 5952 form, as Go's netip.Addr.String.
function ipv6(s: string): string {
  const fail = (): never => {
    throw new UrlError(`invalid IPv6 literal [${s}]`);
  };
  if (!/^[0-9A-Fa-f:.]+$/.test(s)) fail();
  let words: number[] = [];
  let tail = s;
  const v4 = /^(.*:)([0-9.]+)$/.exec(s);
  if (v4 && v4[2].includes(".")) {
    const parts = v4[2].split(".");
    if (parts.length !== 4) fail();
    const bytes = parts.map((p) => (/^(0|[1-9][0-9]{0,2})$/.test(p) ? Number(p) : 256));
    if (bytes.some((b) => b > 255)) fail();
    tail = v4[1] + (((bytes[0] << 8) | bytes[1]).toString(16)) + ":" + (((bytes[2] << 8) | bytes[3]).toString(16));
  } else if (s.includes(".")) {
    fail();
  }
  const halves = tail.split("::");
  if (halves.length > 2) fail();
  const group = (part: string): number[] => {
    if (part === "") return [];
    return part.split(":").map((g) => (/^[0-9A-Fa-f]{1,4}$/.test(g) ? parseInt(g, 16) : fail()));
  };
  if (halves.length === 2) {
    const head = group(halves[0]);
    const rest = group(halves[1]);
    if (head.length + rest.length > 7) fail();
    words = [...head, ...new Array(8 - head.length - rest.length).fill(0), ...rest];
  } else {
    words = group(tail);
    if (words.length !== 8) fail();
  }
  if (words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff) {
    return `::ffff:${words[6] >> 8}.${words[6] & 0xff}.${words[7] >> 8}.${words[7] & 0xff}`;
  }
  // The longest run of two or more zero words becomes "::" (the first of equals).
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(":");
  if (best < 0) return hex(words);
  return hex(words.slice(0, best)) + "::" + hex(words.slice(best + bestLen));
}

function normalizeQuery(query: string): string {
  const pairs: Array<[string, string]> = [];
  for (const seg of query.split("&")) {
    if (seg === "") continue;
    const [name, value] = cut(seg, "=");
    const p: [string, string] = [formDecode(name), formDecode(value)];
    const low = p[0].replace(/[A-Z]/g, (c) => c.toLowerCase()); // ASCII only: U+212A is no 'k'
    if (low.startsWith("utm_") || TRACKING.has(low)) continue;
    pairs.push(p);
  }
  // Stable sort by the decoded name's bytes (one character a byte here).
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return pairs.map(([n, v]) => formEncode(n) + "=" + formEncode(v)).join("&");
}

function formDecode(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "+") out += " ";
    else if (c === "%" && i + 2 < s.length && isHex(s[i + 1]) && isHex(s[i + 2])) {
      out += String.fromCharCode(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else out += c;
  }
  return out;
}

function formEncode(b: string): string {
  let out = "";
  for (const c of b) {
    if (isUnreserved(c)) out += c;
    else if (c === " ") out += "+";
    else out += pct(c);
  }
  return out;
}

function normalizePercent(s: string, extra: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "%" && i + 2 < s.length && isHex(s[i + 1]) && isHex(s[i + 2])) {
      const d = String.fromCharCode(parseInt(s.slice(i + 1, i + 3), 16));
      out += isUnreserved(d) ? d : pct(d);
      i += 2;
    } else if (isUnreserved(c) || isSubDelim(c) || extra.includes(c)) {
      out += c;
    } else {
      out += pct(c);
    }
  }
  return out;
}

function percentDecode(s: string): string | null {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] !== "%") {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.length || !isHex(s[i + 1]) || !isHex(s[i + 2])) return null;
    out += String.fromCharCode(parseInt(s.slice(i + 1, i + 3), 16));
    i += 2;
  }
  return out;
}

function pct(c: string): string {
  return "%" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0");
}

function isHex(c: string | undefined): boolean {
  return c !== undefined && /^[0-9A-Fa-f]$/.test(c);
}

function isUnreserved(c: string): boolean {
  return /^[A-Za-z0-9._~-]$/.test(c);
}

function isSubDelim(c: string): boolean {
  return c.length === 1 && "!$&'()*+,;=".includes(c);
}

function bytesString(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += String.fromCharCode(x);
  return s;
}

function stringBytes(s: string): Uint8Array {
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return b;
}
