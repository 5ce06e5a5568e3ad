package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/shopstream/shopstream/shared/errcode"
)

// Problem types (docs/contract.md#2-http-api). Stable: clients branch on them.
const (
	TypeValidation         = "validation"
	TypeUnauthorized       = "unauthorized"
	TypeForbidden          = "forbidden"
	TypeNotFound           = "not-found"
	TypeConflict           = "conflict"
	TypePreconditionFailed = "precondition-failed"
	TypePayloadTooLarge    = "payload-too-large"
	TypeUnavailable        = "unavailable"
)

// problemOf is the one table from error codes to HTTP problems. An internal
// error is a 500 whose type says what the caller can do: retry later.
var problemOf = map[errcode.Code]struct {
	status int
	typ    string
	title  string
}{
	errcode.Invalid:            {http.StatusBadRequest, TypeValidation, "Invalid request"},
	errcode.Unauthorized:       {http.StatusUnauthorized, TypeUnauthorized, "Unauthorized"},
	errcode.Forbidden:          {http.StatusForbidden, TypeForbidden, "Forbidden"},
	errcode.NotFound:           {http.StatusNotFound, TypeNotFound, "Not found"},
	errcode.Conflict:           {http.StatusConflict, TypeConflict, "Conflict"},
	errcode.PreconditionFailed: {http.StatusPreconditionFailed, TypePreconditionFailed, "Precondition failed"},
	errcode.TooLarge:           {http.StatusRequestEntityTooLarge, TypePayloadTooLarge, "Payload too large"},
	errcode.Unavailable:        {http.StatusServiceUnavailable, TypeUnavailable, "Service unavailable"},
	errcode.Internal:           {http.StatusInternalServerError, TypeUnavailable, "Internal error"},
}

// Problem is an application/problem+json body (RFC 9457).
type Problem struct {
	Type   string               `json:"type"`
	Title  string               `json:"title"`
	Status int                  `json:"status"`
	Detail string               `json:"detail"`
	Errors []errcode.FieldError `json:"errors,omitempty"`
	// Products names the products a conflict is about.
	Products []string `json:"products,omitempty"`
}

// problemFor returns the problem answering err.
func problemFor(err error) Problem {
	code := errcode.Of(err)
	p := problemOf[code]
	out := Problem{Type: p.typ, Title: p.title, Status: p.status, Detail: "internal error"}
	if e := errcode.As(err); e != nil && code != errcode.Internal {
		out.Detail, out.Errors, out.Products = e.Message, e.Fields, e.Products
		if code == errcode.Unavailable {
			out.Detail = "the service is busy; retry later"
		}
	}
	return out
}

// fail answers err as a problem; internal errors are logged in full.
func (h *Handler) fail(ctx context.Context, w http.ResponseWriter, err error) {
	p := problemFor(err)
	if errcode.Of(err) == errcode.Internal || errcode.Of(err) == errcode.Unavailable {
		attrs := []any{"apiRequestId", requestID(ctx), "status", p.Status, "error", err.Error()}
		if ee := (*errcode.Error)(nil); errors.As(err, &ee) && ee.Err != nil {
			// Err is for logs only: what the database answered.
			attrs = append(attrs, "cause", ee.Err.Error())
		}
		h.deps.Logger.ErrorContext(ctx, "request failed", attrs...)
	}
	body, _ := json.Marshal(p)
	if rec, ok := w.(*recorder); ok {
		rec.problemType = p.Type
	}
	w.Header().Set("Content-Type", "application/problem+json")
	if p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if p.Status >= 500 {
		// A failure is not the resource: no cache keeps it.
		w.Header().Set("Cache-Control", "no-store")
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
