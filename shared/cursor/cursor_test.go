package cursor

import (
	"strings"
	"testing"

	"github.com/shopstream/shopstream/shared/errcode"
)

func TestCursor(t *testing.T) {
	s := NewSigner([]byte("secret-secret-secret"))
	c, err := s.Encode("GET /orders\nstatus=PLACED", map[string]string{"orderId": "01J"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := s.Decode("GET /orders\nstatus=PLACED", c, &got); err != nil || got["orderId"] != "01J" {
		t.Fatalf("got %v, %v, want the position back", got, err)
	}
	for name, tc := range map[string]struct{ binding, token string }{
		"other binding": {"GET /orders\nstatus=SHIPPED", c},
		"other secret":  {"GET /orders\nstatus=PLACED", mustEncode(t, NewSigner([]byte("another-secret-xx")), "GET /orders\nstatus=PLACED")},
		"no signature":  {"GET /orders\nstatus=PLACED", strings.Split(c, ".")[0]},
		"too long":      {"GET /orders\nstatus=PLACED", strings.Repeat("a", MaxLen+1)},
		"not base64":    {"GET /orders\nstatus=PLACED", "!!.!!"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Decode(tc.binding, tc.token, &got); errcode.Of(err) != errcode.Invalid {
				t.Errorf("got %v, want an Invalid error", err)
			}
		})
	}
}

func mustEncode(t *testing.T, s *Signer, binding string) string {
	t.Helper()
	c, err := s.Encode(binding, map[string]string{"orderId": "01J"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRotation: during a key rotation a signer accepts the cursors of the
// keys still valid, signs with its own, and refuses a key it was not given.
func TestRotation(t *testing.T) {
	const binding = "GET /orders\nstatus=PLACED"
	oldKey, newKey, other := []byte("previous-secret-xxxxx"), []byte("current-secret-xxxxxx"), []byte("unrelated-secret-xxxx")
	before := NewSigner(oldKey)
	during := NewSigner(newKey, oldKey)
	for name, tc := range map[string]struct {
		token string
		ok    bool
	}{
		"issued before the rotation": {mustEncode(t, before, binding), true},
		"issued during it":           {mustEncode(t, during, binding), true},
		"of another key":             {mustEncode(t, NewSigner(other), binding), false},
	} {
		t.Run(name, func(t *testing.T) {
			var got map[string]string
			err := during.Decode(binding, tc.token, &got)
			if tc.ok && (err != nil || got["orderId"] != "01J") {
				t.Fatalf("got %v, %v, want the position back", got, err)
			}
			if !tc.ok && errcode.Of(err) != errcode.Invalid {
				t.Fatalf("got %v, want an Invalid error", err)
			}
		})
	}
	// What the rotated signer issues, a signer that only knows the old key
	// refuses: it must learn the new key (as pending) before anyone signs
	// with it, which is what the rotation procedure in docs/deploy.md does.
	if err := before.Decode(binding, mustEncode(t, during, binding), new(map[string]string)); errcode.Of(err) != errcode.Invalid {
		t.Fatalf("got %v, want an Invalid error", err)
	}
}

// TestChangedCursorRefused: a cursor with any one character changed, or a
// line break or another character inserted, is refused, also in the last
// character of either part, whose low bits
// base64 does not use: a lenient decoder reads several spellings of one
// cursor as the same bytes, so a changed cursor was served.
func TestChangedCursorRefused(t *testing.T) {
	s := NewSigner([]byte("secret-secret-secret"))
	const binding = "GET /products\n/products\ncategory=lim"
	c, err := s.Encode(binding, map[string]string{"productId": "01J", "category": "lim"})
	if err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	dot := strings.IndexByte(c, '.')
	for _, insert := range []string{"\n", "\r", "\r\n", " ", "="} {
		for _, at := range []int{1, dot + 1, len(c)} {
			changed := c[:at] + insert + c[at:]
			var got map[string]string
			if err := s.Decode(binding, changed, &got); errcode.Of(err) != errcode.Invalid {
				t.Errorf("cursor with %q inserted at %d: got %v, %v; want an Invalid error", insert, at, got, err)
			}
		}
	}
	for _, at := range []int{0, dot - 1, dot + 1, len(c) - 1} {
		for _, ch := range alphabet {
			if byte(ch) == c[at] {
				continue
			}
			changed := c[:at] + string(ch) + c[at+1:]
			var got map[string]string
			if err := s.Decode(binding, changed, &got); errcode.Of(err) != errcode.Invalid {
				t.Errorf("cursor changed at %d to %q: got %v, %v; want an Invalid error", at, ch, got, err)
			}
		}
	}
}
