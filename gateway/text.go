package gateway

import (
	"net/http"
	"net/url"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
)

// invalidURLText refuses a request whose query does not parse, or whose
// path or query, percent-decoded, is not UTF-8, with 400 naming the
// parameter. The gateway would put such
// text into a protobuf string field, which gRPC cannot encode: the call
// would fail before it reaches the server, as an internal error. NUL and
// sizes are the server's validation's to refuse, as for any client.
func invalidURLText(r *http.Request) *problem {
	field, why := "", "must be valid UTF-8"
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		field, why = "query", "is not a valid query string"
	}
	if !utf8.ValidString(r.URL.Path) {
		field, why = "path", "must be valid UTF-8"
	} else {
		for k, vs := range q {
			if !utf8.ValidString(k) {
				field, why = "query", "must be valid UTF-8"
				break
			}
			for _, v := range vs {
				if !utf8.ValidString(v) {
					field, why = k, "must be valid UTF-8"
				}
			}
		}
	}
	if field == "" {
		return nil
	}
	return &problem{
		Type:            "about:blank",
		Title:           http.StatusText(http.StatusBadRequest),
		Status:          http.StatusBadRequest,
		Detail:          "invalid request: " + field + ": " + why,
		Code:            codeName(codes.InvalidArgument),
		FieldViolations: []fieldViolation{{Field: field, Description: why}},
	}
}
