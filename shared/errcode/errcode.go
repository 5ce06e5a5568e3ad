// Package errcode holds the error type of shopstream's domain: a small set of
// codes that say what went wrong in terms a caller can act on. The HTTP edge maps
// each code to one problem type; everything else is an internal error.
package errcode

import (
	"errors"
	"fmt"
)

// Code classifies an Error.
type Code string

// Error codes.
const (
	Invalid            Code = "invalid"             // the request is malformed or breaks a rule
	Unauthorized       Code = "unauthorized"        // no identity
	Forbidden          Code = "forbidden"           // an identity without the right
	NotFound           Code = "not_found"           // the target does not exist
	Conflict           Code = "conflict"            // the target's state forbids the change
	PreconditionFailed Code = "precondition_failed" // If-Match named another version
	TooLarge           Code = "too_large"           // the request body is over the limit
	Unavailable        Code = "unavailable"         // a dependency is throttling or down; retry later
	Internal           Code = "internal"            // a bug or an unexpected failure
)

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a domain error.
type Error struct {
	Code    Code
	Message string
	// Fields lists the invalid fields of an Invalid error.
	Fields []FieldError
	// Products names the products a Conflict is about (short of stock, gone).
	Products []string
	// Err is the underlying cause, for logs; it is never shown to callers.
	Err error
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	if len(e.Fields) > 0 {
		return fmt.Sprintf("%s: %s (%s: %s)", e.Code, e.Message, e.Fields[0].Field, e.Fields[0].Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, &Error{Code: c}) match any Error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == ""
}

// Errorf returns an Error with the code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Of returns the code of the first Error in err's chain, Internal when there is none.
func Of(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// As returns the first Error in err's chain, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Fields collects field errors; Err returns an Invalid Error when any was added.
type Fields []FieldError

// Add records that field is invalid.
func (f *Fields) Add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err returns nil when no field is invalid, else an Invalid Error listing them.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Code: Invalid, Message: "the request has invalid fields", Fields: f}
}
