package apifuzz_test

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// gen makes hostile values from one seeded source, so a run is replayed
// by its seed.
type gen struct {
	r *rand.Rand
	// ids are real ids of the tenant's job, run and schedule: hostile
	// requests on real rows reach the handlers' store paths.
	ids []string
}

func (g *gen) pick(n int) int        { return g.r.IntN(n) }
func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// validUTF8 are the strings a protobuf string field can carry: a NUL,
// control and format characters, lone-surrogate replacements, injection
// shapes, sizes around the limits.
func (g *gen) validUTF8() string {
	switch g.pick(22) {
	case 0:
		return ""
	case 1:
		return "a\x00b"
	case 2:
		return "\x00"
	case 3:
		return strings.Repeat("x", 256)
	case 4:
		return strings.Repeat("é", 3000) // 6,000 bytes, 3,000 characters
	case 5:
		return strings.Repeat("y", 70<<10)
	case 6:
		return "'; DROP TABLE jobs; --"
	case 7:
		return "../../etc/passwd"
	case 8:
		return "\u202e\u2028\ufeff\ufffd"
	case 9:
		return "🦀" + strings.Repeat("\u0301", 50)
	case 10:
		return " \t\r\n "
	case 11:
		return uuid.NewString()
	case 12:
		return strings.ToUpper(uuid.NewString())
	case 13:
		return "00000000-0000-0000-0000-000000000000"
	case 14, 15, 16:
		if len(g.ids) > 0 {
			return g.ids[g.pick(len(g.ids))]
		}
		return uuid.NewString()
	case 17:
		return "summarize"
	case 18:
		return "text/plain; charset=utf-8"
	case 19:
		return "0 3 * * *"
	case 20:
		return "%00%ff"
	default:
		return "eyJ0IjoxLCJpZCI6Im5vdC1hLXV1aWQifQ" // a page token whose id is no uuid
	}
}

// rawText is validUTF8 or bytes that are not UTF-8 at all: for bodies and
// query strings, which no protobuf encoder checks.
func (g *gen) rawText() string {
	switch g.pick(8) {
	case 0:
		return "\xff\xfe"
	case 1:
		return "\xed\xa0\x80" // a lone surrogate, encoded
	case 2:
		return "a\xc3"
	default:
		return g.validUTF8()
	}
}

func (g *gen) number() float64 {
	return []float64{0, -1, 1, 0.5, math.MaxInt64, -math.MaxFloat64, math.MaxFloat64, math.Inf(1), math.NaN(), 1e308, 5e-324}[g.pick(11)]
}

// value is a params value: scalars, deep nests, wide lists, huge strings.
func (g *gen) value(depth int) *structpb.Value {
	if depth > 3 {
		return structpb.NewStringValue(g.validUTF8())
	}
	switch g.pick(9) {
	case 0:
		return structpb.NewNumberValue(g.number())
	case 1:
		return structpb.NewBoolValue(g.chance(0.5))
	case 2:
		return structpb.NewNullValue()
	case 3:
		v := structpb.NewStringValue("leaf")
		for range 10 + g.pick(200) {
			v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		}
		return v
	case 4:
		l := &structpb.ListValue{}
		for range g.pick(5000) {
			l.Values = append(l.Values, structpb.NewNumberValue(1))
		}
		return structpb.NewListValue(l)
	case 5:
		return structpb.NewStructValue(g.params(depth + 1))
	case 6:
		return structpb.NewStringValue(strings.Repeat("p", 1<<g.pick(19)))
	default:
		return structpb.NewStringValue(g.validUTF8())
	}
}

func (g *gen) params(depth int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	n := g.pick(4)
	if g.chance(0.05) {
		n = 70 // over the entry limit
	}
	for i := range n {
		key := g.validUTF8()
		if g.chance(0.5) {
			key = "k" + string(rune('a'+i%26)) + strings.Repeat("k", i/26)
		}
		s.Fields[key] = g.value(depth)
	}
	return s
}

// maxFillDepth bounds how deep fill goes into messages.
const maxFillDepth = 4

// fill sets some fields of m to hostile values, by reflection, so every
// request message of every service is covered as the protos grow.
func (g *gen) fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !g.chance(0.6) {
			continue
		}
		if od := fd.ContainingOneof(); od != nil && m.WhichOneof(od) != nil {
			continue
		}
		g.setField(m, fd, depth)
	}
}

func (g *gen) setField(m protoreflect.Message, fd protoreflect.FieldDescriptor, depth int) {
	switch {
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		for range g.pick(4) {
			k := protoreflect.ValueOfString(g.validUTF8()).MapKey()
			if fd.MapValue().Kind() == protoreflect.StringKind {
				mp.Set(k, protoreflect.ValueOfString(g.validUTF8()))
			}
		}
	case fd.IsList():
		l := m.Mutable(fd).List()
		n := g.pick(4)
		if g.chance(0.03) {
			n = 1001
		}
		elemDepth := depth + 1
		if n > 3 {
			elemDepth = maxFillDepth // a thousand elements: empty ones, or the message is tens of MiB
		}
		for range n {
			if fd.Kind() == protoreflect.MessageKind {
				e := l.NewElement()
				g.fillMessage(e.Message(), elemDepth)
				l.Append(e)
			} else if v, ok := g.scalar(fd); ok {
				l.Append(v)
			}
		}
	case fd.Kind() == protoreflect.MessageKind:
		e := m.NewField(fd)
		g.fillMessage(e.Message(), depth+1)
		m.Set(fd, e)
	default:
		if v, ok := g.scalar(fd); ok {
			m.Set(fd, v)
		}
	}
}

func (g *gen) fillMessage(m protoreflect.Message, depth int) {
	switch v := m.Interface().(type) {
	case *structpb.Struct:
		proto.Merge(v, g.params(0))
	case *durationpb.Duration:
		v.Seconds, v.Nanos = []int64{0, -1, 1, 315576000001, math.MaxInt64}[g.pick(5)], int32(g.pick(3)-1)*999999999
	case *timestamppb.Timestamp:
		v.Seconds = []int64{0, -62135596801, 253402300800, math.MinInt64}[g.pick(4)]
	default:
		if depth < maxFillDepth {
			g.fill(m, depth)
		}
	}
}

func (g *gen) scalar(fd protoreflect.FieldDescriptor) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(g.validUTF8()), true
	case protoreflect.BytesKind:
		b := []byte("Invoice 42\x00\xff")
		if g.chance(0.2) {
			b = make([]byte, maxDocumentBytes+1)
		}
		return protoreflect.ValueOfBytes(b), true
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(g.chance(0.5)), true
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber([]int32{0, 1, 2, 3, -1, 99, math.MaxInt32}[g.pick(7)])), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32([]int32{0, -1, 1, 500, 501, math.MaxInt32, math.MinInt32}[g.pick(7)]), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64([]int64{0, -1, 1, 1 << 40, math.MaxInt64, math.MinInt64}[g.pick(6)]), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32([]uint32{0, 1, math.MaxUint32}[g.pick(3)]), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64([]uint64{0, 1, math.MaxUint64}[g.pick(3)]), true
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(g.number()), true
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(g.number())), true
	}
	return protoreflect.Value{}, false
}

// header is an odd but sendable header value: what a client library lets
// through (printable ASCII for gRPC metadata).
func (g *gen) header() string {
	return []string{"", " ", "k", strings.Repeat("k", 256), strings.Repeat("k", 9000), "a b", "\"quoted\"", "../..", "%00", uuid.NewString(), "Bearer", "Bearer ", "bearer " + keyAcme}[g.pick(13)]
}
