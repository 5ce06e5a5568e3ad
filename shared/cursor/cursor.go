// Package cursor holds the opaque page cursors of list routes: a JSON position
// signed with HMAC-SHA256 together with a binding (the route and its filters),
// so a modified cursor, or one issued for another route, user or filter, is
// rejected instead of read.
package cursor

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync/atomic"

	"github.com/shopstream/shopstream/shared/errcode"
)

// MaxLen bounds the length of a cursor accepted by Decode.
const MaxLen = 4096

// Signer signs cursors with one secret and accepts those of the secrets
// still valid during a rotation. Its keys may be replaced while it serves
// (Rotate), so that a secret's rotation reaches a running process.
type Signer struct {
	keys atomic.Pointer[keySet]
}

type keySet struct {
	key   []byte
	older [][]byte
}

// NewSigner returns a Signer that signs with secret and also accepts cursors
// signed with any of older (the values a key rotation keeps valid).
func NewSigner(secret []byte, older ...[]byte) *Signer {
	s := &Signer{}
	s.Rotate(secret, older...)
	return s
}

// Rotate makes secret the signing key and older the other keys accepted,
// for every cursor encoded or decoded from then on.
func (s *Signer) Rotate(secret []byte, older ...[]byte) {
	ks := &keySet{key: append([]byte(nil), secret...)}
	for _, o := range older {
		ks.older = append(ks.older, append([]byte(nil), o...))
	}
	s.keys.Store(ks)
}

func (s *Signer) mac(binding string, payload []byte) []byte {
	return mac(s.keys.Load().key, binding, payload)
}

// verifies reports whether sig is payload's signature under one of the keys.
func (s *Signer) verifies(binding string, payload, sig []byte) bool {
	ks := s.keys.Load()
	ok := hmac.Equal(sig, mac(ks.key, binding, payload))
	for _, k := range ks.older {
		ok = hmac.Equal(sig, mac(k, binding, payload)) || ok
	}
	return ok
}

func mac(key []byte, binding string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(binding))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)
}

// Encode returns the cursor for position v bound to binding.
func (s *Signer) Encode(binding string, v any) (string, error) {
	// Without HTML escaping: a '<' in a user id stays one byte instead of
	// six, which keeps the longest cursor (the open orders' eight shard
	// positions, each naming a user) under MaxLen. Decoders of every
	// release read both forms; the signature covers the bytes as sent.
	var buf bytes.Buffer
	je := json.NewEncoder(&buf)
	je.SetEscapeHTML(false)
	if err := je.Encode(v); err != nil {
		return "", err
	}
	payload := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
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
	// Base64url and the dot alone: a decoder skips line breaks, so a
	// cursor with one inserted would read as the same bytes.
	if len(token) > MaxLen || strings.IndexFunc(token, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) >= 0 {
		return bad()
	}
	p, m, ok := strings.Cut(token, ".")
	if !ok {
		return bad()
	}
	// Strict: the unused low bits of a last character must be zero, so
	// that a cursor has one spelling and a changed one is refused.
	enc := base64.RawURLEncoding.Strict()
	payload, err := enc.DecodeString(p)
	if err != nil {
		return bad()
	}
	sig, err := enc.DecodeString(m)
	if err != nil || !s.verifies(binding, payload, sig) {
		return bad()
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return bad()
	}
	return nil
}
