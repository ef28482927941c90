package clientsdk_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// keyGen makes hostile inputs for the differential key test: URLs built
// from every part RFC 3986 allows and many it does not, and JSON text with
// unicode forms, lone surrogates, emoji, odd numbers, deep nesting,
// duplicate and reordered keys.
type keyGen struct{ r *rand.Rand }

func (g *keyGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *keyGen) chance(p float64) bool    { return g.r.Float64() < p }

func (g *keyGen) input() keyInput {
	switch n := g.r.IntN(100); {
	case n < 55:
		return keyInput{Op: "url", In: g.url()}
	case n < 92:
		return g.workID()
	default:
		return g.submit()
	}
}

// --- URLs ---

func (g *keyGen) url() string {
	// Half plausible (every part valid, so the normalising paths run), half
	// hostile (any part from anywhere).
	h := g.chance(0.5)
	var b strings.Builder
	b.WriteString(g.either(h, []string{"", "", " "}, []string{"", " ", "\t", "\n ", "\u00a0", "\x00", "\r\n"}))
	b.WriteString(g.either(h, []string{"http", "https", "https", "HTTP", "HtTpS", "ftp", "a+b.c-d"}, []string{"1http", "", "ht tp", "\u00e9", "h_t"}))
	b.WriteString(g.either(h, []string{"://"}, []string{":/", ":", "//", ":///", "\\\\"}))
	if g.chance(0.2) {
		b.WriteString(g.pick("user@", "user:pw@", "User:PW@", "us%65r@", "us%3ar@", "u%zz@", "a@b@", "\u00fc@", ":@", "@", "user:p w@", "%40@", "u%7E@", "u[1]@", "u/x@", "u?@"))
	}
	b.WriteString(g.host(h))
	if g.chance(0.25) {
		b.WriteString(g.either(h, []string{":", ":80", ":443", ":0080", ":00443", ":8080", ":65535", ":0", ":000"}, []string{":65536", ":99999999", ":-1", ":8a", "::80"}))
	}
	for range g.r.IntN(5) {
		b.WriteString(g.pathSegment())
	}
	if g.chance(0.6) {
		b.WriteString(g.query())
	}
	if g.chance(0.2) {
		b.WriteString(g.either(h, []string{"#", "#frag", "#a?b=c", "#%zz", "#\u00e9"}, []string{"#\x01"}))
	}
	b.WriteString(g.either(h, []string{"", "", " ", "\t", "\n"}, []string{"\u3000", "\x00"}))
	s := b.String()
	if !h && g.chance(0.2) { // a hostile byte or character anywhere
		at := g.r.IntN(len(s) + 1)
		s = s[:at] + g.pick("\t", "\n", "\r", "\x00", "\x01", "\x1f", "\x7f", "\u0085", "\u009f", "\xff", "\xc3", "\u200b", "\ufeff", "\U0001F600", " ", "%", "#", "?", "[", "\\") + s[at:]
	}
	return s
}

// either picks from good when plausible, else from good and bad alike.
func (g *keyGen) either(plausible bool, good, bad []string) string {
	if plausible {
		return g.pick(good...)
	}
	return g.pick(append(append([]string(nil), good...), bad...)...)
}

// hostLabels are labels that UTS #46 and IDNA2008 treat in every way:
// mapped, deviation characters, joiners, bidi, hyphens, symbols, length.
var hostLabels = []string{
	"example", "EXAMPLE", "Example", "com", "de", "a", "xn--bcher-kva", "XN--BCHER-KVA", "xn--zz", "xn--",
	"my_host", "a~b", "a!b", "1", "127", "0x7f", "b\u00fccher", "B\u00dcCHER", "bu\u0308cher", "fa\u00df", "\u03c2\u03c3",
	"\u4f8b\u3048", "\u30c6\u30b9\u30c8", "\u043f\u0440\u0438\u043c\u0435\u0440", "\u041f\u0420\u0418\u041c\u0415\u0420",
	"\u0645\u062b\u0627\u0644", "\u05d0\u05d1", "a\u05d0", "\u2603", "\U0001F600", "a\u200db", "a\u200cb",
	"-\u00fc", "\u00fc-", "\u00fc--x", "ab--\u00fc", "\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45", "\u0130stanbul",
	"\u00bd", "\u24d0\u24d1", "\u00fc_x", "\u0661\u0662", "\u06f1", "\u0661\u06f1", "\u0628\u0661", "\u0628\u06f1\u0661", "\u0640\u0628", "\u1100\u1161", "\u00b7",
	"l\u00b7l", "\u00e9", "e\u0301", "\u0301e", "\u00ad\u00fc", "\u2488", "\u00fc" + strings.Repeat("x", 62),
	"\u00fc" + strings.Repeat("x", 70), "\u00fcx%41", "\u00fc%C3%BC", "%C3%BC", "%c3%bc", "ex%41mple", "%zz", "%",
	"ex%2Fample", "ex%00", "%FF", "a b", "\u0131", "\u1e9e", "\u2126", "\u212a",
	// Issue 30: xn-- spelled with non-ASCII or full-width characters, the
	// marks of IDNA2008's IgnorableBlocks, joiners after a virama and
	// elsewhere, ß and ẞ.
	"xn--\u00e9-", "xn--b\u00fccher", "xn--\uff0dx0y", "\uff58\uff4e\uff0d\uff0dbcher-kva", "\uff58\uff4e\uff0d\uff0dzz", "XN--\u00e9",
	"a\u20d0", "a\u20e1", "a\u20f0", "a\U0001d165", "a\U0001d17b", "a\U0001d242", "\u0915\u094d\u200d\u0937", "\u0915\u094d\u200c\u0937",
	"\u0dc3\u0dca\u200d\u0dbb", "\u0915\u200d", "\u200d\u0915", "\u0628\u200c\u0628", "\u0628\u200c\u0662", "\u0628\u0662\u200c\u0628",
	"\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "fa\u1e9e", "FA\u1e9e", "stra\u00dfe", "STRA\u1e9eE",
}

// goodLabels are valid in both SDKs.
var goodLabels = []string{"example", "EXAMPLE", "Example", "com", "de", "a", "xn--bcher-kva", "XN--BCHER-KVA", "xn--zz",
	"my_host", "a~b", "1", "127", "b\u00fccher", "B\u00dcCHER", "bu\u0308cher", "fa\u00df", "\u03c2\u03c3", "\u4f8b\u3048",
	"\u30c6\u30b9\u30c8", "\u043f\u0440\u0438\u043c\u0435\u0440", "\u0645\u062b\u0627\u0644", "\u0130stanbul", "\u00e9",
	"e\u0301", "\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45", "ex%41mple", "%C3%BC", "%c3%bc", "\u24d0\u24d1",
	"\u0915\u094d\u200d\u0937", "\u0915\u094d\u200c\u0937", "\uff58\uff4e\uff0d\uff0dbcher-kva", "fa\u1e9e", "stra\u00dfe"}

func (g *keyGen) host(plausible bool) string {
	if plausible {
		labels := make([]string, 1+g.r.IntN(3))
		for i := range labels {
			labels[i] = goodLabels[g.r.IntN(len(goodLabels))]
		}
		if g.chance(0.1) {
			return g.pick("[::1]", "[::FFFF:1.2.3.4]", "[::ffff:7f00:1]", "[0:0:0:0:0:0:0:1]", "[2001:DB8::1]", "[2001:db8:0:0:1:0:0:1]", "[::1.2.3.4]")
		}
		return strings.Join(labels, g.pick(".", ".", ".", "\u3002", "%2E"))
	}
	switch n := g.r.IntN(100); {
	case n < 10:
		return g.pick("[::1]", "[::FFFF:1.2.3.4]", "[::ffff:7f00:1]", "[0:0:0:0:0:0:0:1]", "[2001:DB8::1]", "[2001:db8:0:0:1:0:0:1]",
			"[2001:db8::0:1]", "[::1%25eth0]", "[v1.x]", "[::1", "[]", "[1::2::3]", "[::ffff:01.2.3.4]", "[::1.2.3.4]",
			"[1:2:3:4:5:6:7:8]", "[1:2:3:4:5:6:7::]", "[12345::]", "[::1]x", "[fe80::1%eth0]")
	case n < 13:
		return g.pick("", "1.2.3.4", "256.1.1.1", "localhost", ".", "..", "example.com.", "a..b")
	}
	labels := make([]string, 1+g.r.IntN(3))
	for i := range labels {
		labels[i] = hostLabels[g.r.IntN(len(hostLabels))]
	}
	if g.chance(0.3) {
		labels = append(labels, g.pick("example", "com", "de", "\u30c6\u30b9\u30c8"))
	}
	return strings.Join(labels, g.pick(".", ".", ".", ".", "\u3002", "\uff0e", "%2E"))
}

// anyRune is any Unicode scalar value: string contents and paths depend on
// no Unicode tables (hosts do, so they draw from hostLabels).
func (g *keyGen) anyRune() rune {
	for {
		if r := rune(g.r.IntN(0x110000)); r < 0xD800 || r > 0xDFFF {
			return r
		}
	}
}

func (g *keyGen) pathSegment() string {
	if g.chance(0.05) {
		return "/" + string(g.anyRune())
	}
	return g.pick("/", "/a", "/A", "/Path", "/a%2Fb", "/a%2fb", "/a b", "/a%20b", "/%7e", "/%7E", "/~", "/%41",
		"/a[1]", "/%5B1%5D", "/\u00fcber", "/%C3%BCber", "/%c3%bcber", "/%zz", "/%", "/%2", "/a;b", "/a=b", "/@", "/a:b",
		"/a\\b", "/a|b", "/a^b", "/a`b", "/{x}", "/<x>", "/\"", "/.", "/..", "/%00", "/\u2028", "/\U0001F600", "/e\u0301",
		"/\u00e9", "/%2e", "/%2E%2E", "/a%2Bb", "/a+b", "/%25", "/%252F", "/%FF", "/\ufffd", "/'", "/!$&()*,")
}

func (g *keyGen) query() string {
	var b strings.Builder
	b.WriteString("?")
	for i := range g.r.IntN(5) {
		if i > 0 {
			b.WriteString(g.pick("&", "&", "&", "&", "&&", ";", "&amp;"))
		}
		b.WriteString(g.pick("a", "b", "A", "q", "x", "utm_source", "UTM_Campaign", "utm_", "gclid", "fbclid", "ms\u212aclid",
			"msclkid", "a b", "a+b", "a%20b", "%zz", "a%3Db", "\u00e9", "e\u0301", "x[]", "", "%75tm_x", "_hsenc", "a%26b"))
		if g.chance(0.85) {
			b.WriteString("=")
			b.WriteString(g.pick("1", "2", "", "a+b", "a%20b", "a b", "1;b=2", "%zz", "%2", "%7E", "%7e", "/x/y", "a=b", "\U0001F600",
				"%FF", "?x", "\u00e9", "%C3%A9", "%c3%a9", "a%2Fb", "%2B", "+", "'", "%", "%%", "[1]", "a&b"))
		}
	}
	return b.String()
}

// --- JSON ---

func (g *keyGen) workID() keyInput {
	in := keyInput{Op: "workid", Kind: "test.work", Version: 1}
	if g.chance(0.05) {
		in.Kind = g.pick("", "a b", "k:1", "\u00e9", strings.Repeat("k", 128), strings.Repeat("k", 129), "a/b-c_d.e", "K")
	}
	if g.chance(0.05) {
		in.Version = g.r.IntN(5) - 1
	}
	depth := 4
	if g.chance(0.04) { // deep: around the bound, and far beyond it
		depth = []int{126, 127, 128, 129, 130, 300, 1000, 10000}[g.r.IntN(8)]
		in.Payload = g.nested(depth)
	} else {
		in.Payload = g.value(depth, false)
	}
	if g.chance(0.15) {
		for range 1 + g.r.IntN(2) {
			in.Drop = append(in.Drop, g.pick("/a", "/0", "/1", "/a/b", "/~0", "/~1", "/a~2", "", "a", "/items/01", "/\u00e9", "/", "/s"))
		}
	}
	return in
}

func (g *keyGen) submit() keyInput {
	return keyInput{
		Op: "submit", Pipeline: g.pick("summarize", "extract", "", " x "), Text: g.text(),
		MediaType: g.pick("text/plain", "", "Text/Plain; charset=UTF-8"), Name: g.text(), ModelProfile: g.pick("default", "", "fast"),
		Params: g.object(3, true),
	}
}

// nested is depth arrays or objects, one inside the other.
func (g *keyGen) nested(depth int) string {
	var open, closing strings.Builder
	for range depth {
		if g.chance(0.5) {
			open.WriteString("[")
			closing.WriteString("]")
		} else {
			open.WriteString(`{"k":`)
			closing.WriteString("}")
		}
	}
	c := []byte(closing.String())
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return open.String() + g.scalar(false) + string(c)
}

// value is JSON text; structSafe leaves out what a protobuf Struct cannot
// hold (lone surrogates, invalid UTF-8).
func (g *keyGen) value(depth int, structSafe bool) string {
	if depth == 0 || g.chance(0.45) {
		return g.scalar(structSafe)
	}
	if g.chance(0.5) {
		return g.object(depth-1, structSafe)
	}
	var b strings.Builder
	b.WriteString(g.pick("[", "[", " [ "))
	for i := range g.r.IntN(4) {
		if i > 0 {
			b.WriteString(g.pick(",", ", ", "\n,"))
		}
		b.WriteString(g.value(depth-1, structSafe))
	}
	b.WriteString("]")
	return b.String()
}

func (g *keyGen) object(depth int, structSafe bool) string {
	var b strings.Builder
	b.WriteString("{")
	n := g.r.IntN(5)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = g.str(structSafe)
		if i > 0 && g.chance(0.1) {
			keys[i] = keys[g.r.IntN(i)] // a duplicate: the last one wins
		}
	}
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(k + g.pick(":", " : ") + g.value(max(depth-1, 0), structSafe))
	}
	b.WriteString("}")
	return b.String()
}

func (g *keyGen) scalar(structSafe bool) string {
	switch n := g.r.IntN(10); {
	case n < 4:
		return g.str(structSafe)
	case n < 8:
		return g.number()
	}
	return g.pick("true", "false", "null")
}

// strPieces are spellings inside a JSON string literal.
var strPieces = []string{
	"a", "Z", "key", "10", "9", " ", "  ", "\\t", "\\n", "\\r\\n", "\u00a0", "\u3000", "\\u0085", "\u2028", "\\u2029",
	"\u200b", "\ufeff", "\\u001c", "\\u001f", "\\u0000", "\\u0001", "\u00e9", "e\u0301", "\\u00e9", "e\\u0301", "\u00c5",
	"A\u030a", "\u212b", "\ufb01", "\U0001F600", "\\ud83d\\ude00", "\U0001F469\u200d\U0001F469\u200d\U0001F467",
	"\u8acb\u6c42\u66f8", "\u0641\u0627\u062a\u0648\u0631\u0629", "\\\"", "\\\\", "\\/", "/", "<a>&amp;", "\u007f",
	"\ufffd", "\\ufffd", "\uffff", "\U0010FFFF", "\\b\\f", "'", "\u0130", "\u0131", "\u00df", "\\u00DF",
}

// unsafePieces cannot stand in a protobuf Struct: lone surrogates (as
// escapes) and invalid UTF-8.
var unsafePieces = []string{"\\ud800", "\\udc00", "\\udfff", "\\ud83d\\u0041", "\\ud83d\\ud83d\\ude00", "\\ude00\\ud83d", "\xff", "\xc3", "\xed\xa0\x80"}

func (g *keyGen) str(structSafe bool) string {
	var b strings.Builder
	b.WriteString(`"`)
	for range g.r.IntN(5) {
		if !structSafe && g.chance(0.04) {
			b.WriteString(g.pick(unsafePieces...))
		} else if g.chance(0.1) {
			b.WriteRune(g.anyRune())
		} else {
			b.WriteString(g.pick(strPieces...))
		}
	}
	b.WriteString(`"`)
	return b.String()
}

func (g *keyGen) text() string {
	if g.chance(0.05) {
		return g.pick("x\xff", "\xed\xa0\x80", "ok")
	}
	return g.pick("", "hello", " hello ", "e\u0301", "\u00e9", "\U0001F600", "line\nbreak", "\x00", `C:\ufffd.txt`, `\\ufffd`, "\ufffd")
}

func (g *keyGen) number() string {
	switch g.r.IntN(8) {
	case 0, 1:
		return g.pick("0", "-0", "-0.0", "0.0", "0e5", "1", "1.0", "1e0", "10e-1", "1E2", "100", "9007199254740993", "9007199254740992",
			"9007199254740991", "-9007199254740993", "18014398509481985", "1e21", "1e+21", "1e-7", "0.1", "0.2", "0.30000000000000004",
			"5e-324", "2.5e-324", "1.7976931348623157e308", "1.7976931348623159e308", "1e308", "1e309", "1e400", "-1e400", "1e-400",
			"123456789012345678901234567890", "0.000001", "0.0000001", "123456.5", "1234567.5", "999999.9999999999", "1e-5", "-1",
			"4.35", "2.675", "1.005", "0.1e1", "100000000000000000000000", "1"+strings.Repeat("0", 400), "-"+strings.Repeat("9", 30),
			"0."+strings.Repeat("0", 400)+"1", "1"+strings.Repeat("0", 4400))
	case 2:
		return strconv.FormatInt(g.r.Int64()>>g.r.IntN(64), 10)
	case 3:
		return "-" + strconv.FormatUint(g.r.Uint64(), 10)
	case 4:
		f := math.Float64frombits(g.r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "1"
		}
		return strconv.FormatFloat(f, g.pick("e", "g", "E")[0], -1, 64)
	case 5:
		return strconv.FormatFloat(g.r.NormFloat64()*math.Pow(10, float64(g.r.IntN(40)-20)), 'g', -1, 64)
	case 6:
		var b strings.Builder
		for range 1 + g.r.IntN(30) {
			b.WriteByte(byte('0' + g.r.IntN(10)))
		}
		s := strings.TrimLeft(b.String(), "0")
		if s == "" {
			s = "0"
		}
		return s + g.pick("", ".5", "e3", "e-3", ".000001")
	}
	return strconv.FormatFloat(float64(g.r.IntN(2000)-1000)/float64(1+g.r.IntN(64)), 'f', -1, 64)
}
