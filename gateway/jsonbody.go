package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A request body that is not JSON, or JSON the request message does not
// take, is answered in the caller's words - where in the body, what was
// expected - not in a decoder's ("unexpected EOF", "proto: (line 1:14):
// ...": issue 30).

// invalidJSONBody is the problem of a body that is not one JSON value, or
// nil.
func invalidJSONBody(body []byte) *problem {
	dec := json.NewDecoder(bytes.NewReader(body))
	var v json.RawMessage
	err := dec.Decode(&v)
	if err == nil {
		end := int(dec.InputOffset())
		if rest := bytes.TrimLeft(body[end:], " \t\r\n"); len(rest) > 0 {
			line, col := position(body, len(body)-len(rest))
			return bodyProblem(fmt.Sprintf("the request body holds more than one JSON value: more follows at line %d, column %d", line, col))
		}
		return nil
	}
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		line, col := position(body, int(syntax.Offset)-1)
		return bodyProblem(fmt.Sprintf("the request body is not JSON: %s at line %d, column %d", syntax.Error(), line, col))
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return bodyProblem(fmt.Sprintf("the request body ends before its JSON value does (after %d bytes): is it cut short, or a bracket or quote not closed?", len(body)))
	}
	return bodyProblem("the request body is not JSON: " + err.Error())
}

func bodyProblem(msg string) *problem {
	st, _ := status.New(codes.InvalidArgument, msg).WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "body", Description: msg}},
	})
	return problemFromStatus(st)
}

// position is the 1-based line and column of byte offset in b.
func position(b []byte, offset int) (line, col int) {
	offset = max(0, min(offset, len(b)))
	line = 1 + bytes.Count(b[:offset], []byte("\n"))
	return line, offset - bytes.LastIndexByte(b[:offset], '\n')
}

// protoJSONError reads a protojson error as grpc-gateway passes it on:
// "proto: (line 1:14): invalid value for string field pipeline: 5". The
// space after "proto:" is a U+00A0 in some binaries and a U+0020 in others
// (protojson picks one by a hash of the binary, so that no one parses its
// messages): both are matched.
var protoJSONError = regexp.MustCompile(`^proto:[\s\x{00a0}]+(?:\(line (\d+):(\d+)\):[\s\x{00a0}]+)?(.*)$`)

// protoPrefix is protojson's "proto: " inside a message, either space.
var protoPrefix = regexp.MustCompile(`proto:[ \x{00a0}]`)

// explainDecodeError rewrites the INVALID_ARGUMENT grpc-gateway answers for
// a body its request message does not take, naming where and what; other
// statuses pass unchanged.
func explainDecodeError(st *status.Status) *status.Status {
	m := protoJSONError.FindStringSubmatch(st.Message())
	if st.Code() != codes.InvalidArgument || m == nil {
		return st
	}
	what := protoPrefix.ReplaceAllString(m[3], "")
	msg := "the request body does not fit the request: " + what
	if m[1] != "" {
		msg = fmt.Sprintf("the request body, at line %s, column %s: %s", m[1], m[2], what)
	}
	out, err := status.New(codes.InvalidArgument, msg).WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "body", Description: msg}},
	})
	if err != nil {
		return status.New(codes.InvalidArgument, msg)
	}
	return out
}
