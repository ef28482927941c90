package jobspec

import (
	"errors"
	"fmt"
)

// ErrInvalid is matched (errors.Is) by every *Error: a request that breaks
// a field rule, and will break it again however often it is sent.
var ErrInvalid = errors.New("invalid request")

// FieldError is one rule a field breaks. Field is the field's path in the
// request ("document.media_type", "params.k"); Description says what is
// wrong in words a caller can act on.
type FieldError struct {
	Field       string
	Description string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Description }

// Violations collects the field rules a request breaks, in the order they
// were checked.
type Violations []*FieldError

// Add records that field breaks a rule, described by format and args.
func (v *Violations) Add(field, format string, args ...any) {
	*v = append(*v, &FieldError{Field: field, Description: fmt.Sprintf(format, args...)})
}

// Prefixed returns v with prefix before every field: the path of the
// message they are in, within the request ("job.", "items[3].request.").
// It changes v's own elements.
func (v Violations) Prefixed(prefix string) Violations {
	for _, fe := range v {
		fe.Field = prefix + fe.Field
	}
	return v
}

// Err returns an *Error of every violation, or nil if there is none.
func (v Violations) Err() error {
	if len(v) == 0 {
		return nil
	}
	return &Error{Violations: v}
}

// Error is an invalid request: every field rule it breaks, at least one.
type Error struct {
	Violations Violations
}

// Error is the first violation, and how many more there are.
func (e *Error) Error() string {
	if len(e.Violations) == 0 {
		return ErrInvalid.Error()
	}
	msg := ErrInvalid.Error() + ": " + e.Violations[0].Field + ": " + e.Violations[0].Description
	if len(e.Violations) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(e.Violations)-1)
	}
	return msg
}

// Is makes errors.Is(err, ErrInvalid) true of every *Error.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
