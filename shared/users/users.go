// Package users holds what a user is and the rules for creating and changing
// one: required fields, email syntax and the case-insensitive email identity
// that keeps emails unique.
package users

import (
	"net/mail"
	"strings"
	"unicode/utf8"

	"github.com/shopstream/shopstream/shared/errcode"
)

// Limits of user fields.
const (
	MaxNameLen  = 200
	MaxEmailLen = 254
)

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
}

// New is the body of a user creation.
type New struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

// Patch is the body of a user change; nil fields stay as they are.
type Patch struct {
	Name  *string `json:"name"`
	Email *string `json:"email"`
}

// EmailKey returns the identity of an email address: two addresses that differ
// only in case or surrounding space are one address.
func EmailKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Validate returns an errcode.Invalid error listing every invalid field.
func (n New) Validate() error {
	var f errcode.Fields
	checkEmail(&f, n.Email)
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
	}
}
