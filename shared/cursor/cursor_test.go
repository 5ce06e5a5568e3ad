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
