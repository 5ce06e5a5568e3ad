package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"
)

type Level int

type inner struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

type self struct {
	*self
	ID string `json:"id"`
}

// TestKeyCheckTakesWhatEncodingJSONTakes: the key check refuses no body that
// encoding/json reads into its type without loss: a json.Number given a
// number, an int quoted by the ",string" option, bytes as base64 text, an
// embedded type that is not a struct (a field named after it), a field of
// the outer struct hiding one of an embedded struct, and a struct that
// embeds itself (which looped forever).
func TestKeyCheckTakesWhatEncodingJSONTakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		body string
	}{
		{"json.Number", &struct {
			N json.Number `json:"n"`
		}{}, `{"n":12.5}`},
		{"quoted int", &struct {
			N int `json:"n,string"`
		}{}, `{"n":"5"}`},
		{"bytes", &struct {
			B []byte `json:"b"`
		}{}, `{"b":"aGk="}`},
		{"embedded non-struct", &struct {
			Level
		}{}, `{"Level":3}`},
		{"outer hides embedded", &struct {
			inner
			Count string `json:"count"`
		}{}, `{"count":"many","name":"x"}`},
		{"self-embedding", &self{}, `{"id":"a"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh := reflect.New(reflect.TypeOf(tc.v).Elem()).Interface()
			if err := json.Unmarshal([]byte(tc.body), fresh); err != nil {
				t.Fatalf("encoding/json refuses %s: %v", tc.body, err)
			}
			if err := checkKeys([]byte(tc.body), reflect.TypeOf(tc.v)); err != nil {
				t.Errorf("key check refuses %s: %v", tc.body, err)
			}
		})
	}
	// What it refuses, it names as the API's own checks do.
	for _, tc := range []struct{ body, want string }{
		{`[]`, "the body must be a JSON object"},
		{`null`, "the body must be a JSON object"},
		{`{"count":"2"}`, "count: must be a whole number"},
		{`{"name":{}}`, "name: must be a string"},
	} {
		err := checkKeys([]byte(tc.body), reflect.TypeFor[*inner]())
		if err == nil || !containsField(err, tc.want) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
}

func containsField(err error, want string) bool {
	f, _ := fieldsOf(err)
	for _, e := range f {
		if e.Field+": "+e.Message == want || e.Field == "" && e.Message == want {
			return true
		}
	}
	return false
}
