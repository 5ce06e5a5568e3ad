// Package cursor holds the opaque page cursors of list routes: a JSON position
// signed with HMAC-SHA256 together with a binding (the route and its filters),
// so a modified cursor, or one issued for another route, user or filter, is
// rejected instead of read.
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/shopstream/shopstream/shared/errcode"
)

// MaxLen bounds the length of a cursor accepted by Decode.
const MaxLen = 4096

// Signer signs and checks cursors with one secret.
type Signer struct{ key []byte }

// NewSigner returns a Signer for the secret.
func NewSigner(secret []byte) *Signer { return &Signer{key: append([]byte(nil), secret...)} }

func (s *Signer) mac(binding string, payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(binding))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)
}

// Encode returns the cursor for position v bound to binding.
func (s *Signer) Encode(binding string, v any) (string, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(s.mac(binding, payload)), nil
}

// Decode checks token against binding and reads its position into v. It
// returns an errcode.Invalid error naming the field "cursor" for any cursor it
// did not issue for this binding.
func (s *Signer) Decode(binding, token string, v any) error {
	bad := func() error {
		f := errcode.Fields{}
		f.Add("cursor", "not a cursor of this list")
		return f.Err()
	}
	if len(token) > MaxLen {
		return bad()
	}
	p, m, ok := strings.Cut(token, ".")
	if !ok {
		return bad()
	}
	enc := base64.RawURLEncoding
	payload, err := enc.DecodeString(p)
	if err != nil {
		return bad()
	}
	sig, err := enc.DecodeString(m)
	if err != nil || !hmac.Equal(sig, s.mac(binding, payload)) {
		return bad()
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return bad()
	}
	return nil
}
