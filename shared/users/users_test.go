package users

import (
	"strings"
	"testing"

	"github.com/shopstream/shopstream/shared/errcode"
)

func TestEmailKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"Alice@Example.com", " alice@example.COM ", true},
		{"ΟΔΥΣΣΕΑΣ@example.com", "οδυσσεας@example.com", true}, // final sigma: strings.ToLower keeps ς
		{"\u212Aate@example.com", "kate@example.com", true},    // Kelvin sign
		{"straße@example.com", "STRASSE@example.com", true},
		{"jos\u00e9@example.com", "jose\u0301@example.com", true}, // NFC
		{"a@example.com", "b@example.com", false},
		{"i@example.com", "ı@example.com", false}, // dotless i is its own letter
	} {
		if got := SameEmail(tc.a, tc.b); got != tc.same {
			t.Errorf("SameEmail(%q, %q): got %v, want %v (keys %q, %q)", tc.a, tc.b, got, tc.same, EmailKey(tc.a), EmailKey(tc.b))
		}
	}
}

func TestOwnEmail(t *testing.T) {
	for _, tc := range []struct {
		claim, body, want string
		code              errcode.Code
	}{
		{"u1@example.com", "", "u1@example.com", ""},
		{"u1@example.com", "U1@EXAMPLE.com", "u1@example.com", ""},
		{"jose\u0301@example.com", "", "jos\u00e9@example.com", ""},
		{"", "u1@example.com", "", errcode.Forbidden},
		{"u1@example.com", "u2@example.com", "", errcode.Forbidden},
		{"u\u200b1@example.com", "", "", errcode.Invalid},
		{" u1@example.com", "", "", errcode.Invalid},
		{"not an address", "", "", errcode.Invalid},
	} {
		got, err := OwnEmail(tc.claim, tc.body)
		if got != tc.want || (err == nil) != (tc.code == "") || (err != nil && errcode.Of(err) != tc.code) {
			t.Errorf("OwnEmail(%q, %q): got %q, %v, want %q, code %q", tc.claim, tc.body, got, err, tc.want, tc.code)
		}
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"u1": true, "a#b": true, "0f8fad5b-d9cb-469f-a165-70867728950e": true, strings.Repeat("u", MaxIDLen): true,
		"": false, strings.Repeat("u", MaxIDLen+1): false, "a\x00b": false, "a\nb": false, "a\x7fb": false, "\xff": false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q): got %v, want %v", id, got, want)
		}
	}
}
