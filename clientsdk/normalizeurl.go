package clientsdk

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// trackingParams are query parameters that say how a visitor arrived, not
// which page they asked for. Names starting with "utm_" are dropped too.
var trackingParams = map[string]bool{
	"gclid": true, "dclid": true, "gbraid": true, "wbraid": true,
	"fbclid": true, "msclkid": true, "yclid": true, "igshid": true,
	"mc_cid": true, "mc_eid": true, "_hsenc": true, "_hsmi": true,
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// NormalizeURL returns one spelling of an absolute URL, so that the same
// page is one intent (one WorkID) however a crawler found it. The rules,
// with examples and the Python SDK's normalize_url that follows them byte
// for byte, are docs/keys.md's; in short:
//
//   - surrounding ASCII white space is trimmed; a control character
//     (U+0000-U+001F, U+007F-U+009F) anywhere else, or invalid UTF-8, is
//     refused;
//   - the scheme is lower-cased; "scheme://" and a host are required;
//   - the host has one form: an ASCII label is lower-cased, a label with
//     other characters becomes its lower-case A-label (UTS #46,
//     non-transitional, STD3 rules, letters, marks and digits only), an
//     IPv6 literal its RFC 5952 text; percent-escapes in the host are
//     decoded first;
//   - a default port (80 for http, 443 for https) and an empty port are
//     dropped, leading zeros of a port too; a port above 65535 is refused;
//   - in the user info and the path, percent-escapes get upper-case hex,
//     an escaped unreserved character is decoded (RFC 3986 §6.2.2), every
//     other escape (%2F among them) is kept, a '%' that starts no escape is
//     written %25 and a character RFC 3986 does not allow there (space,
//     brackets, non-ASCII...) is percent-encoded as UTF-8; an empty path
//     is "/";
//   - the fragment is dropped (it never reaches the server);
//   - the query is a list of name=value pairs split at '&' only (';' is
//     data), each decoded as a form (+ is a space) and re-encoded with
//     only unreserved characters literal; tracking parameters (utm_*,
//     gclid, fbclid, ...) are removed, every other pair is kept, sorted by
//     name (the values of one name keep their order).
func NormalizeURL(raw string) (string, error) {
	out, err := normalizeURL(raw)
	if err != nil {
		return "", fmt.Errorf("oncejob: NormalizeURL %q: %w", raw, err)
	}
	return out, nil
}

func normalizeURL(raw string) (string, error) {
	s := strings.Trim(raw, " \t\n\v\f\r")
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("invalid UTF-8")
	}
	for i, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return "", fmt.Errorf("control character U+%04X at byte %d", r, i)
		}
	}
	s, _, _ = strings.Cut(s, "#")
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || !validScheme(scheme) || !strings.HasPrefix(rest, "//") {
		return "", fmt.Errorf("not an absolute URL (scheme://host...)")
	}
	scheme = strings.ToLower(scheme)
	rest = rest[2:]
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, rest := rest[:end], rest[end:]
	path, query, _ := strings.Cut(rest, "?")

	var b strings.Builder
	b.WriteString(scheme + "://")
	hostport := authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		hostport = authority[at+1:]
		if userinfo := authority[:at]; userinfo != "" {
			b.WriteString(normalizePercent(userinfo, userinfoChars) + "@")
		}
	}
	host, port, err := splitHostPort(hostport)
	if err != nil {
		return "", err
	}
	if host, err = normalizeHost(host); err != nil {
		return "", err
	}
	b.WriteString(host)
	if port != "" && defaultPorts[scheme] != port {
		b.WriteString(":" + port)
	}
	if path == "" {
		path = "/"
	}
	b.WriteString(normalizePercent(path, pathChars))
	if q := normalizeQuery(query); q != "" {
		b.WriteString("?" + q)
	}
	return b.String(), nil
}

func validScheme(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlpha(c) && !isDigit(c) && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// splitHostPort returns the host (an IPv6 literal with its brackets) and
// the port without leading zeros ("" when absent or empty).
func splitHostPort(hostport string) (host, port string, err error) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", "", fmt.Errorf("missing ']' in host")
		}
		host, port = hostport[:end+1], hostport[end+1:]
		if port != "" && port[0] != ':' {
			return "", "", fmt.Errorf("junk after ']' in host")
		}
		port = strings.TrimPrefix(port, ":")
	} else {
		host, port, _ = strings.Cut(hostport, ":")
	}
	if port == "" {
		return host, "", nil
	}
	for i := 0; i < len(port); i++ {
		if !isDigit(port[i]) {
			return "", "", fmt.Errorf("invalid port %q", port)
		}
	}
	port = strings.TrimLeft(port, "0")
	if n, err := strconv.Atoi(port); len(port) > 5 || err == nil && n > 65535 {
		return "", "", fmt.Errorf("port %s is above 65535", port)
	}
	if port == "" {
		port = "0"
	}
	return host, port, nil
}

// idnaProfile is UTS #46 processing, non-transitional, with the STD3 rules,
// joiner, bidi and DNS length checks: what the Python SDK gets from the idna
// package's encode(uts46=True, std3_rules=True). Hyphens are checked apart
// (checkHyphens), by character: the package counts bytes.
var idnaProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(true),
	idna.VerifyDNSLength(true), idna.BidiRule(), idna.CheckHyphens(false), idna.CheckJoiners(true))

// idnaMapping is UTS #46's mapping alone (non-transitional, STD3), for
// uts46Map.
var idnaMapping = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.ValidateLabels(false),
	idna.StrictDomainName(true), idna.VerifyDNSLength(false), idna.CheckHyphens(false), idna.CheckJoiners(false))

// uts46Map is label after UTS #46's mapping, before any label is decoded
// as punycode: a digit goes first, which no mapping composes with, so the
// label does not start with "xn--" as x/net/idna looks at it.
func uts46Map(label string) string {
	m, _ := idnaMapping.ToUnicode("0" + label) // the mapped text, also when invalid
	return m[1:]
}

// normalizeHost returns the one form of a host: see NormalizeURL.
func normalizeHost(host string) (string, error) {
	if strings.HasPrefix(host, "[") {
		addr, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return "", fmt.Errorf("invalid IPv6 literal %s", host)
		}
		return "[" + addr.String() + "]", nil
	}
	decoded, ok := percentDecode(host)
	if !ok {
		return "", fmt.Errorf("invalid percent-encoding in host")
	}
	if !utf8.Valid(decoded) {
		return "", fmt.Errorf("host is not UTF-8")
	}
	if len(decoded) == 0 {
		return "", fmt.Errorf("not an absolute URL (no host)")
	}
	h := strings.NewReplacer("\u3002", ".", "\uff0e", ".", "\uff61", ".").Replace(string(decoded))
	labels := strings.Split(h, ".")
	for i, label := range labels {
		var err error
		if labels[i], err = normalizeLabel(label); err != nil {
			return "", err
		}
	}
	return strings.Join(labels, "."), nil
}

func normalizeLabel(label string) (string, error) {
	if isASCII(label) {
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isUnreserved(c) && !isSubDelim(c) {
				return "", fmt.Errorf("invalid character %q in host", c)
			}
		}
		return strings.ToLower(label), nil
	}
	// UTS #46 decodes a label that maps to "xn--..." as an A-label; one
	// that still holds a non-ASCII character then is no A-label at all
	// (x/net/idna decoded "xn--é-" as "é": issue 30).
	mapped := uts46Map(label)
	if strings.HasPrefix(mapped, "xn--") && !isASCII(mapped) {
		return "", fmt.Errorf("host label %q: starts with xn-- but is not ASCII", label)
	}
	a, err := idnaProfile.ToASCII(label)
	if err != nil {
		return "", fmt.Errorf("host label %q: %w", label, err)
	}
	if strings.HasPrefix(mapped, "xn--") && a != mapped {
		return "", fmt.Errorf("host label %q: %s is not the A-label of what it decodes to (%s)", label, mapped, a)
	}
	u, err := idnaProfile.ToUnicode(a)
	if err != nil {
		return "", fmt.Errorf("host label %q: %w", label, err)
	}
	if r := []rune(u); r[0] == '-' || r[len(r)-1] == '-' || len(r) >= 4 && r[2] == '-' && r[3] == '-' {
		return "", fmt.Errorf("host label %q: a hyphen at its start or end, or in its 3rd and 4th places", label)
	}
	if strings.ContainsFunc(u, isArabicIndicDigit) && strings.ContainsFunc(u, isExtendedArabicIndicDigit) {
		// RFC 5892 Appendix A.8 and A.9 (CONTEXTO), which Python's idna
		// checks and Go's does not.
		return "", fmt.Errorf("host label %q mixes Arabic-Indic and extended Arabic-Indic digits", label)
	}
	if err := checkJoiners(u); err != nil {
		return "", fmt.Errorf("host label %q: %w", label, err)
	}
	for _, r := range u {
		if !idnaLetterDigit(r) && r != zwnj && r != zwj { // joiners: checkJoiners
			return "", fmt.Errorf("host label %q: %U is not a letter, mark or digit (IDNA2008)", label, r)
		}
	}
	return a, nil
}

// The joiners: allowed in a U-label right after a virama, refused anywhere
// else (docs/keys.md). IDNA2008 also allows ZWNJ between Arabic-script
// letters that join; x/net/idna and Python's idna each check that
// differently (a non-joining character after it: accepted by Go; before
// it: skipped by Python), so both SDKs refuse it rather than disagree.
const (
	zwnj = '\u200C'
	zwj  = '\u200D'
)

// viramas are the code points of Canonical_Combining_Class 9 (Virama) in
// Unicode 14, listed so that every SDK holds the same set whatever its
// Unicode tables (docs/keys.md).
var viramas = map[rune]bool{}

func init() {
	for _, r := range []rune{
		0x094D, 0x09CD, 0x0A4D, 0x0ACD, 0x0B4D, 0x0BCD, 0x0C4D, 0x0CCD, 0x0D3B,
		0x0D3C, 0x0D4D, 0x0DCA, 0x0E3A, 0x0EBA, 0x0F84, 0x1039, 0x103A, 0x1714,
		0x1715, 0x1734, 0x17D2, 0x1A60, 0x1B44, 0x1BAA, 0x1BAB, 0x1BF2, 0x1BF3,
		0x2D7F, 0xA806, 0xA82C, 0xA8C4, 0xA953, 0xA9C0, 0xAAF6, 0xABED, 0x10A3F,
		0x11046, 0x11070, 0x1107F, 0x110B9, 0x11133, 0x11134, 0x111C0, 0x11235, 0x112EA,
		0x1134D, 0x11442, 0x114C2, 0x115BF, 0x1163F, 0x116B6, 0x1172B, 0x11839, 0x1193D,
		0x1193E, 0x119E0, 0x11A34, 0x11A47, 0x11A99, 0x11C3F, 0x11D44, 0x11D45, 0x11D97,
	} {
		viramas[r] = true
	}
}

// checkJoiners refuses a ZWJ or ZWNJ of U-label u that does not follow a
// virama.
func checkJoiners(u string) error {
	prev := rune(-1)
	for _, r := range u {
		if (r == zwj || r == zwnj) && !viramas[prev] {
			return fmt.Errorf("%U is allowed only right after a virama", r)
		}
		prev = r
	}
	return nil
}

// idnaLetterDigit reports whether r may stand in a U-label: IDNA2008's
// LetterDigits (RFC 5892 §2.1: Ll Lu Lo Lm Mn Mc Nd) and '-', less the
// exceptions it disallows (§2.6), old Hangul jamo (§2.9) and the
// IgnorableBlocks (§2.8: Combining Diacritical Marks for Symbols, Musical
// Symbols, Ancient Greek Musical Notation, whose 59 marks Go accepted and
// Python refused: issue 30), plus the exceptions it allows.
func idnaLetterDigit(r rune) bool {
	switch {
	case r == '-' || r == 0x06FD || r == 0x06FE || r == 0x0F0B || r == 0x3007:
		return true
	case r == 0x0640 || r == 0x07FA || r == 0x302E || r == 0x302F || r >= 0x3031 && r <= 0x3035 || r == 0x303B,
		r >= 0x1100 && r <= 0x11FF || r >= 0xA960 && r <= 0xA97F || r >= 0xD7B0 && r <= 0xD7FF,
		r >= 0x20D0 && r <= 0x20FF || r >= 0x1D100 && r <= 0x1D1FF || r >= 0x1D200 && r <= 0x1D24F:
		return false
	}
	return unicode.In(r, unicode.Ll, unicode.Lu, unicode.Lo, unicode.Lm, unicode.Mn, unicode.Mc, unicode.Nd)
}

func isArabicIndicDigit(r rune) bool         { return r >= 0x0660 && r <= 0x0669 }
func isExtendedArabicIndicDigit(r rune) bool { return r >= 0x06F0 && r <= 0x06F9 }

// normalizeQuery returns the query's pairs without tracking parameters,
// sorted by name, each form-decoded and re-encoded; "" when none is left.
func normalizeQuery(query string) string {
	type pair struct{ name, value []byte }
	var pairs []pair
	for seg := range strings.SplitSeq(query, "&") {
		if seg == "" {
			continue
		}
		name, value, _ := strings.Cut(seg, "=")
		p := pair{formDecode(name), formDecode(value)}
		low := asciiLower(p.name) // not Unicode's: U+212A KELVIN SIGN is no 'k' here
		if strings.HasPrefix(low, "utm_") || trackingParams[low] {
			continue
		}
		pairs = append(pairs, p)
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return bytes.Compare(a.name, b.name) })
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(formEncode(p.name) + "=" + formEncode(p.value))
	}
	return b.String()
}

// formDecode decodes one name or value of a query: '+' is a space, %XX a
// byte, and a '%' that starts no escape stands for itself.
func formDecode(s string) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			out = append(out, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			out = append(out, c)
		}
	}
	return out
}

// formEncode writes unreserved bytes as they are, a space as '+' and every
// other byte as %XX.
func formEncode(b []byte) string {
	var out strings.Builder
	for _, c := range b {
		switch {
		case isUnreserved(c):
			out.WriteByte(c)
		case c == ' ':
			out.WriteByte('+')
		default:
			fmt.Fprintf(&out, "%%%02X", c)
		}
	}
	return out.String()
}

// The characters RFC 3986 allows literally, besides unreserved and
// sub-delims, in the user info and in the path.
const (
	userinfoChars = ":"
	pathChars     = ":@/"
)

// normalizePercent applies RFC 3986 §6.2.2.1-2 to s: escapes get upper-case
// hex, escaped unreserved characters are decoded, a '%' that starts no
// escape is written %25, and a byte that is neither unreserved, a
// sub-delim nor in extra is percent-encoded.
func normalizePercent(s, extra string) string {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(d) {
				out.WriteByte(d)
			} else {
				fmt.Fprintf(&out, "%%%02X", d)
			}
			i += 2
		case isUnreserved(c) || isSubDelim(c) || strings.IndexByte(extra, c) >= 0:
			out.WriteByte(c)
		default:
			fmt.Fprintf(&out, "%%%02X", c)
		}
	}
	return out.String()
}

// percentDecode decodes every %XX of s; false when a '%' starts no escape.
func percentDecode(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return nil, false
		}
		out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
		i += 2
	}
	return out, true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isUnreserved(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

func isSubDelim(c byte) bool { return strings.IndexByte("!$&'()*+,;=", c) >= 0 }

func unhex(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func asciiLower(b []byte) string {
	out := []byte(string(b))
	for i, c := range out {
		if c >= 'A' && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
