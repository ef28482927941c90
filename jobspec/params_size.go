package jobspec

import (
	"google.golang.org/protobuf/types/known/structpb"
)

// Params limits, beside MaxParams and MaxParamKeyLen (check.go). Params
// come back in every Job of GetJob, ListJobs and the watches, so one job's
// must stay far below the clients' 4 MiB receive limit, a page of jobs
// included: 64 KiB a value and 256 KiB in all.
const (
	maxParamValueBytes = 64 << 10
	maxParamsBytes     = 256 << 10
	maxParamDepth      = 32
)

// checkParamsSize bounds each top-level value, the whole and the nesting
// of params. Sizes are those of the JSON the store keeps, counted without
// encoding it; the walk stops at the first bound crossed, so hostile params
// cost at most the bytes already received.
func checkParamsSize(params *structpb.Struct, v *Violations) {
	total := 0
	for k, val := range params.GetFields() {
		n, ok := jsonSize(val, 1, maxParamValueBytes)
		switch {
		case !ok && n < 0:
			v.Add("params."+PrintableKey(k), "nests deeper than %d levels", maxParamDepth)
		case !ok:
			v.Add("params."+PrintableKey(k), "is over %d KiB as JSON", maxParamValueBytes>>10)
		}
		total += len(k) + 4 + max(n, 0)
	}
	if total > maxParamsBytes {
		v.Add("params", "are over %d KiB as JSON in all", maxParamsBytes>>10)
	}
}

// jsonSize is about the size of v as JSON (strings counted unescaped, a
// number as 24 bytes), up to limit: ok is false when it is over the limit,
// with n = -1 when v nests deeper than maxParamDepth.
func jsonSize(v *structpb.Value, depth, limit int) (n int, ok bool) {
	if depth > maxParamDepth {
		return -1, false
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		n = len(k.StringValue) + 2
	case *structpb.Value_NumberValue:
		n = 24
	case *structpb.Value_StructValue:
		n = 2
		for key, e := range k.StructValue.GetFields() {
			m, ok := jsonSize(e, depth+1, limit-n)
			if !ok {
				return m, false
			}
			n += len(key) + 4 + m
		}
	case *structpb.Value_ListValue:
		n = 2
		for _, e := range k.ListValue.GetValues() {
			m, ok := jsonSize(e, depth+1, limit-n)
			if !ok {
				return m, false
			}
			n += m + 1
		}
	default: // bool, null, unset
		n = 5
	}
	return n, n <= limit
}
