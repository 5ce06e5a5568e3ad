// Package users holds what a user is and the rules for creating and changing
// one: what a user id may be, required fields, email syntax, whose email an
// address may be (the identity's own, from its token) and the caseless email
// identity that keeps emails unique.
package users

import (
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/text"
)

// Limits of user fields.
const (
	MaxIDLen    = 128
	MaxNameLen  = 200
	MaxEmailLen = 254
)

// ValidID reports whether id can be a user id (the token's sub): 1 to
// MaxIDLen bytes of UTF-8 without control characters. Any other id names no
// user and is never looked up.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLen || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// User is a registered user. The counter fields are maintained by the counters
// processor from the streams; the API only reads them.
type User struct {
	UserID             string `json:"userId" dynamodbav:"userId"`
	Email              string `json:"email" dynamodbav:"email"`
	Name               string `json:"name" dynamodbav:"name"`
	OrderCount         int64  `json:"orderCount" dynamodbav:"orderCount,omitempty"`
	LifetimeSpendCents int64  `json:"lifetimeSpendCents" dynamodbav:"lifetimeSpendCents,omitempty"`
	ReviewCount        int64  `json:"reviewCount" dynamodbav:"reviewCount,omitempty"`
	CreatedAt          string `json:"createdAt" dynamodbav:"createdAt"`
	UpdatedAt          string `json:"updatedAt" dynamodbav:"updatedAt"`
	Version            int64  `json:"version" dynamodbav:"version"`
	// Shape is the version of the item's stored shape; absent on items
	// written before shapes were recorded, which are shape 1.
	Shape int `json:"-" dynamodbav:"shape,omitempty"`
}

// New is the body of a user creation. The email is optional: the address is
// the token's email claim, and a body email must be that one.
type New struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

// Patch is the body of a user change; nil fields stay as they are.
type Patch struct {
	Name  *string `json:"name"`
	Email *string `json:"email"`
}

// EmailKey returns the identity of an email address, under which it is
// unique: two addresses are one when they are equal after trimming, canonical
// decomposition, full Unicode case folding and canonical composition (the
// Unicode Standard's canonical caseless match, in NFC). Unlike
// strings.ToLower, full folding maps final sigma and sigma alike, and "ß" to
// "ss".
func EmailKey(email string) string {
	s := norm.NFD.String(strings.TrimSpace(email))
	return norm.NFC.String(cases.Fold().String(s))
}

// SameEmail reports whether a and b are one address.
func SameEmail(a, b string) bool { return EmailKey(a) == EmailKey(b) }

// OwnEmail returns the address a user may register or switch to: the email
// claim of the user's own token, in NFC. body, when not empty, is the address
// the request names; it must be that claim. Codes: Forbidden (no claim, or
// body names another address), Invalid (the claim is not a usable address).
func OwnEmail(claim, body string) (string, error) {
	if claim == "" {
		return "", errcode.Errorf(errcode.Forbidden, "the token carries no email claim")
	}
	var f errcode.Fields
	if checkEmail(&f, claim); len(f) > 0 || claim != strings.TrimSpace(claim) {
		g := errcode.Fields{}
		g.Add("email", "the token's email claim is not a usable address")
		return "", g.Err()
	}
	if body != "" && !SameEmail(body, claim) {
		return "", errcode.Errorf(errcode.Forbidden, "the email must be the token's own (its email claim)")
	}
	return norm.NFC.String(claim), nil
}

// Validate returns an errcode.Invalid error listing every invalid field.
func (n New) Validate() error {
	var f errcode.Fields
	if n.Email != "" {
		checkEmail(&f, n.Email)
	}
	checkName(&f, n.Name)
	return f.Err()
}

// Validate returns an errcode.Invalid error listing every invalid field.
func (p Patch) Validate() error {
	var f errcode.Fields
	if p.Name == nil && p.Email == nil {
		f.Add("", "name or email is required")
	}
	if p.Email != nil {
		checkEmail(&f, *p.Email)
	}
	if p.Name != nil {
		checkName(&f, *p.Name)
	}
	return f.Err()
}

func checkEmail(f *errcode.Fields, email string) {
	e := strings.TrimSpace(email)
	switch {
	case e == "":
		f.Add("email", "is required")
	case len(e) > MaxEmailLen:
		f.Add("email", "is longer than %d bytes", MaxEmailLen)
	case !utf8.ValidString(e):
		f.Add("email", "is not valid UTF-8")
	case hasHidden(e):
		f.Add("email", "holds control or invisible characters")
	default:
		a, err := mail.ParseAddress(e)
		if err != nil || a.Address != e || a.Name != "" {
			f.Add("email", "is not an email address")
		}
	}
}

func checkName(f *errcode.Fields, name string) {
	n := strings.TrimSpace(name)
	switch {
	case n == "":
		f.Add("name", "is required")
	case !utf8.ValidString(n):
		f.Add("name", "is not valid UTF-8")
	case utf8.RuneCountInString(n) > MaxNameLen:
		f.Add("name", "is longer than %d characters", MaxNameLen)
	case text.Line(n) != "":
		f.Add("name", "%s", text.Line(n))
	}
}

// hasHidden reports control, format (zero-width, bidi), private-use, surrogate
// and separator characters, and the other default-ignorable ones (Hangul
// fillers, variation selectors, the combining grapheme joiner): characters
// that make two addresses look alike on screen while they differ.
func hasHidden(s string) bool {
	for _, r := range s {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Z,
			unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) {
			return true
		}
	}
	return false
}
