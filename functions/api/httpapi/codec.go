package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/errcode"
)

// decode reads the JSON body into v: one JSON object, no unknown fields, no
// trailing data. The body is read as JSON whatever its Content-Type says, as
// AWS's own JSON APIs do: `curl -d` sends form-urlencoded, and a body that is
// not JSON fails on its content, with the field at fault. Codes: Invalid,
// TooLarge.
func decode(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// readBody reads the body, at most MaxBodyBytes. Codes: TooLarge.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return nil, tooLarge()
	}
	return body, nil
}

// fieldsOf splits err into its field errors (to add more) and any other error.
func fieldsOf(err error) (errcode.Fields, error) {
	if e := errcode.As(err); e != nil && e.Code == errcode.Invalid {
		return e.Fields, nil
	}
	return nil, err
}

// decodeJSON is decode's body rule, on bytes.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "a JSON body is required")
	}
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("", "the body must hold one JSON value")
	}
	return nil
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalid("", "the body is not well-formed JSON")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("", "the body must be a JSON object")
		}
		return invalid(typ.Field, "must be a "+jsonType(typ.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalid(field, "is not a known field")
	}
	return invalid("", "the body is not valid JSON for this route")
}

func jsonType(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "whole number" // 1.0 and 1e2 are numbers, and not read as these
	case strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "slice":
		return "list"
	case kind == "struct", kind == "map", kind == "ptr":
		return "object"
	}
	return kind
}

func invalid(field, msg string) error {
	f := errcode.Fields{}
	f.Add(field, "%s", msg)
	return f.Err()
}

// write answers status with v as JSON.
func write(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		body = []byte(`{}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// list is the body of every list response.
type list[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// paging is the limit and position of a list request.
type paging struct {
	limit   int
	after   *store.Position
	raw     json.RawMessage // the cursor's position as signed
	binding string
}

// pageParams reads limit and cursor. The cursor is bound to the route, the
// path (which names the user or product) and every filter. Codes: Invalid.
func (h *Handler) pageParams(r *http.Request) (paging, error) {
	q := r.URL.Query()
	var f errcode.Fields
	// A parameter given twice is refused, not read as its first value: a
	// client that sends two categories, two limits or two cursors means
	// something no answer can honour.
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if len(q[k]) > 1 {
			f.Add(k, "is given more than once")
		}
	}
	p := paging{limit: store.DefaultLimit}
	if v := q.Get("limit"); q.Has("limit") {
		// Digits alone, no sign or leading zero: one spelling of each limit.
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxLimit || strconv.Itoa(n) != v {
			f.Add("limit", "must be an integer from 1 to %d", store.MaxLimit)
		}
		p.limit = n
	}
	p.binding = binding(r.Pattern, r.URL.EscapedPath(), q)
	if c := q.Get("cursor"); q.Has("cursor") {
		var pos store.Position
		if err := h.deps.Cursors.Decode(p.binding, c, &p.raw); err != nil || json.Unmarshal(p.raw, &pos) != nil {
			f.Add("cursor", "not a cursor of this list")
		} else {
			p.after = &pos
		}
	}
	return p, f.Err()
}

// binding is what a cursor is bound to: the route pattern, the path and the
// filters (every query parameter but limit and cursor) in a canonical
// encoding: names sorted, names and values query-escaped, values in the order
// given. Escaping keeps "?q=foo&category=c" and "?q=foo%26category%3Dc" apart;
// neither the pattern nor an escaped path nor the encoding holds a newline.
func binding(pattern, path string, q url.Values) string {
	filters := url.Values{}
	for k, vs := range q {
		if k != "limit" && k != "cursor" {
			filters[k] = vs
		}
	}
	return pattern + "\n" + path + "\n" + filters.Encode()
}

// writePage answers a page of items with the cursor of the next page. A
// page whose body, as Lambda carries it, would exceed the page budget is
// cut after the items that fit (at least one), its cursor continuing there.
func writePage[T any](h *Handler, w http.ResponseWriter, r *http.Request, p paging, page store.Page[T]) error {
	if page.Items == nil {
		page.Items = []T{}
	}
	body, err := pageBody(h, p, page)
	if err != nil {
		return err
	}
	budget := h.deps.PageBudget
	// Escaping makes at most 6 bytes of one: a smaller body always fits.
	if len(body)*6 > budget && len(page.Items) > 1 && page.Cut != nil && escapedLen(body) > budget {
		// The items that fit with room for the list's own JSON and its
		// cursor; one fewer while the whole still does not.
		full, cut := page.Items, page
		for n := min(fitting(full, budget-pageOverhead), len(full)-1); n >= 1; n-- {
			cut.Items, cut.Next = full[:n], page.Cut(n)
			if body, err = pageBody(h, p, cut); err != nil {
				return err
			}
			if escapedLen(body) <= budget || n == 1 {
				break
			}
		}
		h.deps.Logger.InfoContext(r.Context(), "page cut to fit Lambda's response", "items", len(cut.Items), "of", len(full), "bytes", escapedLen(body), "budget", budget)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}

// pageBody is a page's JSON with the cursor of the next page.
func pageBody[T any](h *Handler, p paging, page store.Page[T]) ([]byte, error) {
	out := list[T]{Items: page.Items}
	if page.Next != nil {
		c, err := h.deps.Cursors.Encode(p.binding, page.Next)
		if err != nil {
			return nil, fmt.Errorf("encode cursor: %w", err)
		}
		out.NextCursor = c
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode page: %w", err)
	}
	return body, nil
}

// pageOverhead is room for a list's JSON around its items, the cursor
// included, escaped.
const pageOverhead = 4096

// fitting returns how many of items, from the first, fit in budget bytes
// once escaped (at least one).
func fitting[T any](items []T, budget int) int {
	total := 0
	for i, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return max(i, 1)
		}
		total += escapedLen(b) + 1 // and its comma
		if total > budget {
			return max(i, 1)
		}
	}
	return len(items)
}

// escapedLen is b's length as a JSON string's content, escaped as the Go
// Lambda runtime escapes the response body (encoding/json without HTML
// escaping; the body's own JSON has already escaped <, > and &).
func escapedLen(b []byte) int {
	var e bytes.Buffer
	enc := json.NewEncoder(&e)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(string(b)); err != nil {
		return len(b) * 6
	}
	return e.Len() - 3 // the quotes and Encode's newline
}

// ifMatch reads If-Match: a version number, bare or as an ETag ("3", W/"3").
// "*" or absent: nil. Codes: Invalid.
func ifMatch(r *http.Request) (*int64, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return nil, nil
	}
	// A weak tag is taken as its version: CloudFront weakens the ETag of
	// an answer it compresses ("W/\"3\""), and a client that sends back
	// what it read through the CDN means that version.
	v = strings.Trim(strings.TrimPrefix(v, "W/"), `"`)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, invalid("If-Match", "must be a version number")
	}
	return &n, nil
}

// etag sets the ETag of a versioned resource that is one item: its version
// moves with every write of it, so the tag names its bytes.
func etag(w http.ResponseWriter, version int64) {
	w.Header().Set("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

// productTag sets the ETag of a product, a weak one (W/"3"): its page is
// its catalog item and its stock buckets, each read eventually consistent,
// and its version the sum of theirs, so two instances behind on different
// items can answer two pages of one version (a newer bucket with an older
// catalog item, and the reverse). A strong tag would claim the same bytes.
// The tag still names the version, which If-Match takes and If-None-Match
// compares weakly (RFC 9110 13.1.2); CloudFront already weakens the tag of
// an answer it compresses.
func productTag(w http.ResponseWriter, version int64) {
	w.Header().Set("ETag", `W/"`+strconv.FormatInt(version, 10)+`"`)
}

// noneMatch reports whether the request's If-None-Match names the version:
// a list of entity tags, weak or strong (a weak comparison, RFC 9110
// 13.1.2), or "*".
func noneMatch(r *http.Request, version int64) bool {
	want := `"` + strconv.FormatInt(version, 10) + `"`
	for _, v := range r.Header.Values("If-None-Match") {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
			if tag == want || tag == "*" {
				return true
			}
		}
	}
	return false
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
