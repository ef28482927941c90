package server

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobspec"
)

// maxTextLen bounds every string field of a request that has no limit of its
// own (a filter, a sink name, a cron spec): no such field needs more, and a
// bound keeps any one of them far below the clients' 4 MiB receive limit
// when it comes back in an answer. A document's text and params' values
// have their own limits (package jobspec).
const maxTextLen = 4096

// validateText checks every string of a request, whatever the RPC, map keys
// and values and params included: valid UTF-8 (gRPC refuses invalid UTF-8
// before us, the HTTP gateway may not), free of NUL (Postgres's text and
// jsonb cannot hold it, so a NUL would otherwise reach the store and fail
// there), and within maxTextLen where the field has no limit of its own.
// Each offending field is named once, by its path in the request.
func validateText(req any, v *violations) {
	m, ok := req.(proto.Message)
	if !ok {
		return
	}
	walkText(m.ProtoReflect(), "", v)
}

func walkText(m protoreflect.Message, prefix string, v *violations) {
	ownLimit := isOwnLimit(m.Interface())
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		if ownLimit && !isDocument(m.Interface()) {
			path = strings.TrimSuffix(prefix, ".") // params.k, not params.fields.k.struct_value
		}
		switch {
		case fd.IsMap():
			val.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				key := k.String()
				checkString(key, path, ownLimit, v)
				elem := path + "." + jobspec.PrintableKey(key)
				if fd.MapValue().Kind() == protoreflect.StringKind {
					checkString(mv.String(), elem, ownLimit, v)
				} else if fd.MapValue().Kind() == protoreflect.MessageKind {
					walkText(mv.Message(), elem+".", v)
				}
				return true
			})
		case fd.IsList():
			l := val.List()
			for i := range l.Len() {
				if fd.Kind() == protoreflect.StringKind {
					checkString(l.Get(i).String(), path, ownLimit, v)
				} else if fd.Kind() == protoreflect.MessageKind {
					walkText(l.Get(i).Message(), path+".", v)
				}
			}
		case fd.Kind() == protoreflect.StringKind:
			checkString(val.String(), path, ownLimit, v)
		case fd.Kind() == protoreflect.MessageKind:
			walkText(val.Message(), path+".", v)
		}
		return true
	})
}

// isOwnLimit reports whether the strings of m are bounded elsewhere: a
// document's text by the document limit, params' values by the params
// limits.
func isOwnLimit(m proto.Message) bool {
	switch m.(type) {
	case *oncejobv1.Document, *structpb.Struct, *structpb.Value, *structpb.ListValue:
		return true
	}
	return false
}

func isDocument(m proto.Message) bool {
	_, ok := m.(*oncejobv1.Document)
	return ok
}

func checkString(s, field string, ownLimit bool, v *violations) {
	switch {
	case !utf8.ValidString(s):
		v.addOnce(field, "must be valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		v.addOnce(field, "must not contain NUL characters")
	case !ownLimit && len(s) > maxTextLen:
		v.addOnce(field, "must be at most %d bytes", maxTextLen)
	}
}
