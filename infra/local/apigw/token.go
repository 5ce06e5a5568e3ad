package apigw

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

var b64 = base64.RawURLEncoding

// Claims are what a dev token says about its holder.
type Claims struct {
	Sub string
	// Email is the email claim (as Cognito's ID tokens carry it, verified);
	// empty: <sub>@example.com. NoEmail leaves the claim out.
	Email   string
	NoEmail bool
	// Unverified sets email_verified to false, as Cognito does after a user
	// changes their address and before they confirm it.
	Unverified bool
	Admin      bool
}

// Issuer and Audience are what the local authorizer requires of a token's
// iss and aud (or client_id, when it has no aud), as a deployed stage's JWT
// authorizer requires its user pool's issuer and its app client's id; dev
// tokens carry them.
const (
	Issuer   = "https://shopstream.local/issuer"
	Audience = "shopstream-local"
)

// DefaultEmail is the email claim of a dev token that names none.
func DefaultEmail(sub string) string { return sub + "@example.com" }

// Token mints a dev JWT (HS256) that the emulation accepts: sub, the email
// claim <sub>@example.com, the admin group in cognito:groups when admin, iat
// and exp.
func Token(secret []byte, sub string, admin bool, ttl time.Duration) (string, error) {
	return TokenFor(secret, Claims{Sub: sub, Admin: admin}, ttl)
}

// TokenFor mints a dev JWT with the claims c.
func TokenFor(secret []byte, c Claims, ttl time.Duration) (string, error) {
	if c.Sub == "" {
		return "", errors.New("token: sub is required")
	}
	now := time.Now()
	claims := map[string]any{"sub": c.Sub, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "token_use": "id", "iss": Issuer, "aud": Audience}
	if !c.NoEmail {
		claims["email"] = cmp.Or(c.Email, DefaultEmail(c.Sub))
		claims["email_verified"] = !c.Unverified
	}
	if c.Admin {
		claims["cognito:groups"] = []string{"admin"}
	}
	head, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	body, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	signing := b64.EncodeToString(head) + "." + b64.EncodeToString(body)
	return signing + "." + b64.EncodeToString(sign(secret, signing)), nil
}

// forAudience says whether a token's aud (a string or a list), or its
// client_id when it has no aud, names Audience: API Gateway evaluates aud
// when both are there ("Troubleshooting issues with HTTP API JWT
// authorizers", API Gateway developer guide).
func forAudience(claims map[string]any) bool {
	switch aud := claims["aud"].(type) {
	case string:
		return aud == Audience
	case []any:
		for _, a := range aud {
			if a == Audience {
				return true
			}
		}
		return false
	case nil:
		id, _ := claims["client_id"].(string)
		return id == Audience
	}
	return false
}

func sign(secret []byte, s string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// verify checks an HS256 JWT and returns its claims as API Gateway's JWT
// authorizer passes them: every value a string, arrays as "[a b]". An
// error's text is the reason the authorizer gives in www-authenticate's
// error_description.
func verify(secret []byte, tok string, now time.Time) (map[string]string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, errors.New("the token is malformed")
	}
	var head struct{ Alg string }
	raw, err := b64.DecodeString(parts[0])
	if err != nil || json.Unmarshal(raw, &head) != nil || head.Alg != "HS256" {
		return nil, errors.New("the token's header is not HS256")
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, sign(secret, parts[0]+"."+parts[1])) {
		return nil, errors.New("the token does not have a valid signature")
	}
	raw, err = b64.DecodeString(parts[1])
	if err != nil {
		return nil, errors.New("the token's claims are malformed")
	}
	var claims map[string]any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return nil, errors.New("the token's claims are malformed")
	}
	exp, ok := claims["exp"].(json.Number)
	if !ok {
		return nil, errors.New("the token has no exp claim")
	}
	if n, err := exp.Int64(); err != nil || now.Unix() >= n {
		return nil, errors.New("the token has expired")
	}
	// The authorizer refuses a token not valid yet, or issued after now. A
	// date that is not a number (a JWT's dates are NumericDates) is refused
	// too, as a missing exp is.
	for _, c := range []struct{ claim, why string }{{"nbf", "the token is not valid yet"}, {"iat", "the token was issued in the future"}} {
		v, present := claims[c.claim]
		if !present {
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("the token's %s claim is not a number", c.claim)
		}
		if at, err := n.Int64(); err != nil || now.Unix() < at {
			return nil, errors.New(c.why)
		}
	}
	if iss, _ := claims["iss"].(string); iss != Issuer {
		return nil, errors.New("the token does not have a valid issuer")
	}
	if !forAudience(claims) {
		return nil, errors.New("the token does not have a valid audience")
	}
	out := make(map[string]string, len(claims))
	for k, v := range claims {
		switch x := v.(type) {
		case string:
			out[k] = x
		case json.Number:
			out[k] = x.String()
		case []any:
			items := make([]string, len(x))
			for i, e := range x {
				items[i] = fmt.Sprint(e)
			}
			out[k] = "[" + strings.Join(items, " ") + "]"
		default:
			b, _ := json.Marshal(x)
			out[k] = string(b)
		}
	}
	return out, nil
}
