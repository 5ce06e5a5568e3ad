package search

import (
	"fmt"
	"net/http"
)

// apiError is an error answered the way OpenSearch shapes it:
// {"error":{"root_cause":[...],"type":...,"reason":...},"status":N}.
type apiError struct {
	status int
	typ    string
	reason string
	index  string
	uuid   string
	// causedBy is the exception OpenSearch wrapped, when it names one.
	causedBy *errorCause
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: %s", e.typ, e.reason)
}

// cause is the inner object of an error, also used for bulk item failures.
type errorCause struct {
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	Index     string `json:"index,omitempty"`
	Shard     string `json:"shard,omitempty"`
	IndexUUID string `json:"index_uuid,omitempty"`
}

func (e *apiError) cause() errorCause {
	c := errorCause{Type: e.typ, Reason: e.reason, Index: e.index, IndexUUID: e.uuid}
	if e.typ == "version_conflict_engine_exception" || e.typ == "mapper_parsing_exception" || e.typ == "document_missing_exception" {
		c.Shard = "0"
	}
	return c
}

type errorBody struct {
	Error  errorDetail `json:"error"`
	Status int         `json:"status"`
}

type errorDetail struct {
	RootCause []errorCause `json:"root_cause"`
	errorCause
	CausedBy *errorCause `json:"caused_by,omitempty"`
}

func (e *apiError) body() errorBody {
	c := e.cause()
	return errorBody{Error: errorDetail{RootCause: []errorCause{c}, errorCause: c, CausedBy: e.causedBy}, Status: e.status}
}

func newError(status int, typ, format string, args ...any) *apiError {
	return &apiError{status: status, typ: typ, reason: fmt.Sprintf(format, args...)}
}

func badRequest(typ, format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, typ, format, args...)
}

func parsingError(format string, args ...any) *apiError {
	return badRequest("parsing_exception", format, args...)
}

func illegalArgument(format string, args ...any) *apiError {
	return badRequest("illegal_argument_exception", format, args...)
}

func jsonParseError(err error) *apiError {
	return badRequest("json_parse_exception", "malformed JSON: %v", err)
}

func unsupported(format string, args ...any) *apiError {
	e := illegalArgument(format, args...)
	e.reason += " (not supported by the local search service)"
	return e
}

func validationError(reasons ...string) *apiError {
	msg := "Validation Failed: "
	for i, r := range reasons {
		msg += fmt.Sprintf("%d: %s;", i+1, r)
	}
	return badRequest("action_request_validation_exception", "%s", msg)
}

func indexNotFound(name string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "index_not_found_exception", reason: fmt.Sprintf("no such index [%s]", name), index: name, uuid: "_na_"}
}

func mapperParsing(idx *index, format string, args ...any) *apiError {
	e := badRequest("mapper_parsing_exception", format, args...)
	if idx != nil {
		e.index, e.uuid = idx.name, idx.meta.UUID
	}
	return e
}

func versionConflict(idx *index, format string, args ...any) *apiError {
	return &apiError{status: http.StatusConflict, typ: "version_conflict_engine_exception", reason: fmt.Sprintf(format, args...), index: idx.name, uuid: idx.meta.UUID}
}
