package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/tables"
)

func TestHealthz(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/healthz", anonymous, nil)
	want(t, r, 200)
	if got := r.str("status"); got != "ok" {
		t.Errorf("got status %q, want ok", got)
	}
}

func TestUsers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := caller{sub: "alice", email: "Alice@Example.com"}
	bob := userCaller("bob")

	r := e.do("POST", "/users", alice, map[string]any{"email": "Alice@Example.com", "name": "Alice"})
	want(t, r, 201)
	if r.str("userId") != "alice" || r.num("version") != 1 || r.str("email") != "Alice@Example.com" {
		t.Fatalf("got %s, want alice at version 1 with her email", r.Body)
	}
	if r.Headers["location"] != "/users/alice" {
		t.Errorf("got location %q, want /users/alice", r.Headers["location"])
	}
	for _, k := range []string{"orderCount", "lifetimeSpendCents", "reviewCount"} {
		if v, ok := r.json[k]; !ok || v != 0.0 {
			t.Errorf("got %s = %v, want 0", k, v)
		}
	}

	t.Run("user exists", func(t *testing.T) {
		want(t, e.do("POST", "/users", alice, map[string]any{"name": "A"}), 409, "conflict")
	})
	t.Run("email taken, case-insensitively", func(t *testing.T) {
		// Only a token carrying the address can name it: bob's identity
		// provider verified alice's address in another case.
		r := e.do("POST", "/users", caller{sub: "bob2", email: "alice@EXAMPLE.com"}, map[string]any{"name": "Bob"})
		want(t, r, 409, "conflict")
	})
	t.Run("validation lists every field", func(t *testing.T) {
		r := e.do("POST", "/users", bob, map[string]any{"email": "not an email", "name": ""})
		want(t, r, 400, "validation")
		if errs, _ := r.json["errors"].([]any); len(errs) != 2 {
			t.Errorf("got errors %v, want 2 (email, name)", r.json["errors"])
		}
	})
	t.Run("unknown field", func(t *testing.T) {
		want(t, e.do("POST", "/users", bob, map[string]any{"email": "bob@example.com", "name": "B", "admin": true}), 400, "validation")
	})
	t.Run("malformed JSON", func(t *testing.T) {
		want(t, e.do("POST", "/users", bob, `{"email":`), 400, "validation")
	})
	t.Run("a form body is not JSON", func(t *testing.T) {
		want(t, e.do("POST", "/users", bob, `email=bob@example.com&name=B`, "Content-Type", "application/x-www-form-urlencoded"), 400, "validation")
	})
	t.Run("JSON under another content type is read as JSON", func(t *testing.T) {
		// What `curl -d '{...}'` sends.
		r := e.do("POST", "/users", userCaller("cara"), `{"email":"cara@example.com","name":"Cara"}`, "Content-Type", "application/x-www-form-urlencoded")
		want(t, r, 201)
		if r.str("email") != "cara@example.com" {
			t.Errorf("got %s, want cara's user", r.Body)
		}
	})

	want(t, e.do("POST", "/users", bob, map[string]any{"email": "bob@example.com", "name": "Bob"}), 201)

	t.Run("get own", func(t *testing.T) {
		r := e.do("GET", "/users/alice", alice, nil)
		want(t, r, 200)
		if r.str("name") != "Alice" || r.Headers["etag"] != `"1"` {
			t.Errorf("got %s etag %q, want Alice with etag \"1\"", r.Body, r.Headers["etag"])
		}
	})
	t.Run("get other", func(t *testing.T) {
		want(t, e.do("GET", "/users/alice", bob, nil), 403, "forbidden")
	})
	t.Run("admin gets any, 404 when absent", func(t *testing.T) {
		want(t, e.do("GET", "/users/alice", adminCaller("root"), nil), 200)
		want(t, e.do("GET", "/users/nobody", adminCaller("root"), nil), 404, "not-found")
	})

	t.Run("patch name with If-Match", func(t *testing.T) {
		want(t, e.do("PATCH", "/users/alice", alice, map[string]any{"name": "Alice B"}, "If-Match", "7"), 412, "precondition-failed")
		r := e.do("PATCH", "/users/alice", alice, map[string]any{"name": "Alice B"}, "If-Match", `"1"`)
		want(t, r, 200)
		if r.str("name") != "Alice B" || r.num("version") != 2 {
			t.Errorf("got %s, want Alice B at version 2", r.Body)
		}
		want(t, e.do("PATCH", "/users/alice", alice, map[string]any{"name": "x"}, "If-Match", "abc"), 400, "validation")
		want(t, e.do("PATCH", "/users/alice", alice, map[string]any{}), 400, "validation")
	})

	t.Run("email change moves the claim", func(t *testing.T) {
		moved := caller{sub: "alice", email: "alice@new.example.com"}
		r := e.do("PATCH", "/users/alice", moved, map[string]any{"email": "alice@new.example.com"})
		want(t, r, 200)
		if r.str("email") != "alice@new.example.com" {
			t.Errorf("got email %q, want alice@new.example.com", r.str("email"))
		}
		// The old address is free again; the new one is taken.
		want(t, e.do("POST", "/users", caller{sub: "carol", email: "alice@example.com"}, map[string]any{"name": "Carol"}), 201)
		want(t, e.do("POST", "/users", caller{sub: "dave", email: "Alice@New.Example.com"}, map[string]any{"name": "Dave"}), 409, "conflict")
		// The same address in another case is no change: the claim stays.
		r = e.do("PATCH", "/users/alice", alice, map[string]any{"email": "ALICE@new.example.com"})
		want(t, r, 200)
		if r.str("email") != "alice@new.example.com" {
			t.Errorf("got email %q, want alice@new.example.com kept", r.str("email"))
		}
	})
	t.Run("patch unknown user", func(t *testing.T) {
		want(t, e.do("PATCH", "/users/nobody", adminCaller("root"), map[string]any{"name": "N"}), 404, "not-found")
	})
}

// TestEmailIsTheIdentitys: an address is the token's own email claim, so
// nobody registers or switches to an address that is not theirs; addresses
// are unique under NFC and full case folding; hidden characters are refused.
func TestEmailIsTheIdentitys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mallory := userCaller("mallory")

	t.Run("another's address is refused, and the owner registers later", func(t *testing.T) {
		want(t, e.do("POST", "/users", mallory, map[string]any{"email": "victim@example.com", "name": "M"}), 403, "forbidden")
		want(t, e.do("POST", "/users", userCaller("victim"), map[string]any{"email": "victim@example.com", "name": "V"}), 201)
	})
	t.Run("the body email may be left out or differ in case only", func(t *testing.T) {
		r := e.do("POST", "/users", mallory, map[string]any{"email": "MALLORY@example.com", "name": "M"})
		want(t, r, 201)
		if r.str("email") != "mallory@example.com" {
			t.Errorf("got email %q, want the claim mallory@example.com", r.str("email"))
		}
		r = e.do("POST", "/users", userCaller("quiet"), map[string]any{"name": "Q"})
		want(t, r, 201)
		if r.str("email") != "quiet@example.com" {
			t.Errorf("got email %q, want the claim quiet@example.com", r.str("email"))
		}
	})
	t.Run("no email claim", func(t *testing.T) {
		want(t, e.do("POST", "/users", caller{sub: "anon", noEmail: true}, map[string]any{"email": "anon@example.com", "name": "A"}), 403, "forbidden")
	})
	t.Run("switching to another's address", func(t *testing.T) {
		want(t, e.do("PATCH", "/users/mallory", mallory, map[string]any{"email": "someone@example.com"}), 403, "forbidden")
		// An admin's token carries the admin's address, not the user's.
		want(t, e.do("PATCH", "/users/mallory", adminCaller("root"), map[string]any{"email": "root@example.com"}), 403, "forbidden")
		r := e.do("GET", "/users/mallory", mallory, nil)
		if r.str("email") != "mallory@example.com" {
			t.Errorf("got email %q, want mallory@example.com unchanged", r.str("email"))
		}
	})
	for name, tc := range map[string]struct{ first, second string }{
		"final sigma":         {"ΟΔΥΣΣΕΑΣ@example.com", "οδυσσεας@example.com"},
		"kelvin sign":         {"\u212Aate@example.com", "kate@example.com"},
		"sharp s":             {"straße@example.com", "STRASSE@example.com"},
		"composed accent":     {"jos\u00e9@example.com", "jose\u0301@example.com"},
		"composed, uppercase": {"JOS\u00c9@example.org", "jose\u0301@example.org"},
	} {
		t.Run("one address: "+name, func(t *testing.T) {
			a, b := "a-"+name, "b-"+name
			want(t, e.do("POST", "/users", caller{sub: a, email: tc.first}, map[string]any{"name": "A"}), 201)
			want(t, e.do("POST", "/users", caller{sub: b, email: tc.second}, map[string]any{"name": "B"}), 409, "conflict")
		})
	}
	for name, addr := range map[string]string{
		"zero-width space": "a\u200bb@example.com",
		"right-to-left":    "ab\u202e@example.com",
		"soft hyphen":      "a\u00adb@example.com",
		"hangul filler":    "a\u3164b@example.com",
		"control":          "a\u0007b@example.com",
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			r := e.do("POST", "/users", caller{sub: "h-" + name, email: addr}, map[string]any{"name": "H"})
			want(t, r, 400, "validation")
			r = e.do("POST", "/users", userCaller("h2-"+name), map[string]any{"email": addr, "name": "H"})
			want(t, r, 400, "validation")
		})
	}
}

// TestEmailChangeWithoutOldClaim: an email change whose old address has no
// claim item (lost, or written under an older key) moves the user instead of
// failing forever; a claim that another user holds stays theirs.
func TestEmailChangeWithoutOldClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	emails := tables.Physical(e.prefix, tables.UserEmails)
	ctx := context.Background()

	e.mustUser("lost")
	if _, err := e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(emails), Key: map[string]types.AttributeValue{"email": &types.AttributeValueMemberS{Value: "lost@example.com"}},
	}); err != nil {
		t.Fatal(err)
	}
	r := e.do("PATCH", "/users/lost", caller{sub: "lost", email: "found@example.com"}, map[string]any{"email": "found@example.com"})
	want(t, r, 200)
	if r.str("email") != "found@example.com" {
		t.Errorf("got %s, want email found@example.com", r.Body)
	}
	want(t, e.do("POST", "/users", caller{sub: "other", email: "found@example.com"}, map[string]any{"name": "O"}), 409, "conflict")

	e.mustUser("held")
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(emails), Item: map[string]types.AttributeValue{
		"email": &types.AttributeValueMemberS{Value: "held@example.com"}, "userId": &types.AttributeValueMemberS{Value: "someone-else"},
		"createdAt": &types.AttributeValueMemberS{Value: "2026-01-01T00:00:00Z"},
	}}); err != nil {
		t.Fatal(err)
	}
	want(t, e.do("PATCH", "/users/held", caller{sub: "held", email: "held2@example.com"}, map[string]any{"email": "held2@example.com"}), 200)
	out, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(emails), Key: map[string]types.AttributeValue{"email": &types.AttributeValueMemberS{Value: "held@example.com"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if owner, _ := out.Item["userId"].(*types.AttributeValueMemberS); owner == nil || owner.Value != "someone-else" {
		t.Errorf("got claim %v, want held@example.com still someone-else's", out.Item)
	}
}

// TestUnverifiedEmailIsRefused: Cognito lets a user set their email
// attribute to anyone's address and then issues tokens carrying it with
// email_verified false. Such a token cannot register the address or move a
// user to it (403), so its owner is never locked out; it may still change
// the user's name.
func TestUnverifiedEmailIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mallory := caller{sub: "mallory", email: "victim@example.com", unverified: true}
	r := e.do("POST", "/users", mallory, map[string]any{"name": "M"})
	want(t, r, 403, "forbidden")
	if !strings.Contains(r.str("detail"), "not verified") {
		t.Errorf("detail: got %q, want it to say the address is not verified", r.str("detail"))
	}
	want(t, e.do("POST", "/users", caller{sub: "mallory", email: "victim@example.com", unverified: true}, map[string]any{"email": "victim@example.com", "name": "M"}), 403, "forbidden")

	e.mustUser("mallory")
	want(t, e.do("PATCH", "/users/mallory", mallory, map[string]any{"email": "victim@example.com"}), 403, "forbidden")
	want(t, e.do("PATCH", "/users/mallory", mallory, map[string]any{"name": "Still M"}), 200)
	// The owner registers their own address afterwards.
	want(t, e.do("POST", "/users", caller{sub: "victim", email: "victim@example.com"}, map[string]any{"name": "V"}), 201)
}
