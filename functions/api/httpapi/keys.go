package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// checkKeys refuses what encoding/json lets through in a body that is
// otherwise well-formed: bytes that are not UTF-8 (it would store U+FFFD in
// their place), an object that names a field twice (the last would win,
// and another reader of the same bytes may take the first), and a field
// named other than as declared (it matches names regardless of case, so
// "ITEMS" would be read as "items"). It also refuses, first in the body's
// order, a field not declared and a value of the wrong JSON type, naming
// the field by its whole path, list positions included (items[1].quantity):
// encoding/json names them without positions (items.quantity), or by the
// last name alone (quantity). t is the type the body decodes into. A body
// that is not well-formed JSON passes: decoding reports it.
func checkKeys(body []byte, t reflect.Type) error {
	if !utf8.Valid(body) || loneSurrogate(body) {
		return invalid("", "the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := walkKeys(dec, t, ""); err != nil && !errors.Is(err, errMalformed) {
		return err
	}
	return nil
}

// errMalformed ends a walk of a body that is not well-formed JSON, which
// decoding then reports.
var errMalformed = errors.New("malformed JSON")

func walkKeys(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return errMalformed
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && decodesItself(t) {
		t = nil // its own JSON: its own checks, and its own field names
	}
	if path == "" && tok == nil {
		// null: encoding/json leaves the value as it was, an empty request.
		return invalid("", "the body must be a JSON object")
	}
	if want := mismatch(tok, t); want != "" {
		if path == "" {
			return invalid("", "the body must be a JSON "+want)
		}
		return invalid(path, "must be "+article(want)+" "+want)
	}
	switch tok {
	case json.Delim('{'):
		fields := jsonFields(t)
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errMalformed
			}
			key, _ := kt.(string)
			at := joinPath(path, key)
			if seen[key] {
				return invalid(at, "appears twice")
			}
			seen[key] = true
			var ft reflect.Type
			switch {
			case fields != nil:
				f, ok := fields[key]
				if !ok {
					for name := range fields {
						if strings.EqualFold(name, key) {
							return invalid(at, fmt.Sprintf("is not a known field (field names are case-sensitive: %s)", name))
						}
					}
					return invalid(at, "is not a known field")
				}
				ft = f
			case t != nil && t.Kind() == reflect.Map:
				ft = t.Elem()
			}
			if err := walkKeys(dec, ft, at); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errMalformed
		}
	case json.Delim('['):
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, et, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errMalformed
		}
	}
	return nil
}

// decodesItself says whether values of t read their own JSON (a
// json.Unmarshaler or an encoding.TextUnmarshaler).
func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(reflect.TypeFor[json.Unmarshaler]()) || pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

// mismatch is the JSON type that t takes when tok, the first token of a
// value, is not of it (as encoding/json would refuse it: a whole number
// for an integer, whatever a number's text says), or "" when it fits or t
// is not known. null fits everything, as encoding/json leaves the field
// as it was.
func mismatch(tok json.Token, t reflect.Type) string {
	if t == nil || tok == nil || t == reflect.TypeFor[json.Number]() {
		return ""
	}
	k := t.Kind()
	fits := false
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			fits = k == reflect.Struct || k == reflect.Map || k == reflect.Interface
		case '[':
			fits = k == reflect.Slice || k == reflect.Array || k == reflect.Interface
		default:
			return "" // not a value's first token: decoding reports it
		}
	case string:
		// []byte reads base64 text; json.Number, a number's text.
		fits = k == reflect.String || k == reflect.Interface || k == reflect.Slice && t.Elem().Kind() == reflect.Uint8
	case bool:
		fits = k == reflect.Bool || k == reflect.Interface
	case json.Number:
		switch {
		case k >= reflect.Int && k <= reflect.Int64:
			_, err := strconv.ParseInt(v.String(), 10, t.Bits())
			fits = err == nil
		case k >= reflect.Uint && k <= reflect.Uintptr:
			_, err := strconv.ParseUint(v.String(), 10, t.Bits())
			fits = err == nil
		case k == reflect.Float32 || k == reflect.Float64:
			_, err := strconv.ParseFloat(v.String(), t.Bits())
			fits = err == nil
		default:
			fits = k == reflect.Interface
		}
	default:
		return ""
	}
	if fits {
		return ""
	}
	return jsonType(k.String())
}

// jsonFields are the JSON names of struct type t's fields (embedded
// structs' included) and their types (nil for a field whose value is
// quoted, the ",string" option: its text is checked when decoded); nil when
// t is not a struct, or decodes itself (json.Unmarshaler), whose names are
// its own.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if t == nil || t.Kind() != reflect.Struct || decodesItself(t) {
		return nil
	}
	return structFields(t, map[reflect.Type]bool{})
}

// structFields are the JSON fields of struct t as encoding/json finds them: its
// own first, then those of its embedded structs that none of its own
// hides; an embedded type that is not a struct is a field named after it.
// visiting stops a struct that embeds itself.
func structFields(t reflect.Type, visiting map[reflect.Type]bool) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	if visiting[t] {
		return out
	}
	visiting[t] = true
	defer delete(visiting, t)
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if slices.Contains(strings.Split(opts, ","), "string") {
			ft = nil
		}
		out[name] = ft
	}
	for _, et := range embedded {
		for k, v := range structFields(et, visiting) {
			if _, hidden := out[k]; !hidden {
				out[k] = v
			}
		}
	}
	return out
}

// article is "an" before a word that begins with a vowel, else "a".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// loneSurrogate says whether a string of body escapes half of a UTF-16
// surrogate pair ("\ud800" alone), which names no character: encoding/json
// reads it as U+FFFD.
func loneSurrogate(body []byte) bool {
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(body):
			if body[i+1] != 'u' {
				i++ // an escape of one character
				continue
			}
			r, ok := hex4(body, i+2)
			switch {
			case !ok:
				return false // not JSON: decoding says so
			case r >= 0xDC00 && r <= 0xDFFF:
				return true // a low half with no high half before it
			case r >= 0xD800 && r <= 0xDBFF:
				low, ok := rune(0), i+11 < len(body) && body[i+6] == '\\' && body[i+7] == 'u'
				if ok {
					low, ok = hex4(body, i+8)
				}
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return true
				}
				i += 11
			default:
				i += 5
			}
		}
	}
	return false
}

// hex4 reads the four hex digits of a \u escape at body[at:].
func hex4(body []byte, at int) (rune, bool) {
	if at+4 > len(body) {
		return 0, false
	}
	var r rune
	for _, c := range body[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
