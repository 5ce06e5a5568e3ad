package httpapi_test

import (
	"testing"
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
	alice, bob := userCaller("alice"), userCaller("bob")

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
		want(t, e.do("POST", "/users", alice, map[string]any{"email": "other@example.com", "name": "A"}), 409, "conflict")
	})
	t.Run("email taken, case-insensitively", func(t *testing.T) {
		want(t, e.do("POST", "/users", bob, map[string]any{"email": "alice@EXAMPLE.com", "name": "Bob"}), 409, "conflict")
	})
	t.Run("validation lists every field", func(t *testing.T) {
		r := e.do("POST", "/users", bob, map[string]any{"email": "not an email", "name": ""})
		want(t, r, 400, "validation")
		if errs, _ := r.json["errors"].([]any); len(errs) != 2 {
			t.Errorf("got errors %v, want 2 (email, name)", r.json["errors"])
		}
	})
	t.Run("unknown field", func(t *testing.T) {
		want(t, e.do("POST", "/users", bob, map[string]any{"email": "b@example.com", "name": "B", "admin": true}), 400, "validation")
	})
	t.Run("malformed JSON", func(t *testing.T) {
		want(t, e.do("POST", "/users", bob, `{"email":`), 400, "validation")
	})
	t.Run("a form body is not JSON", func(t *testing.T) {
		want(t, e.do("POST", "/users", bob, `email=b@example.com&name=B`, "Content-Type", "application/x-www-form-urlencoded"), 400, "validation")
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
		want(t, e.do("PATCH", "/users/alice", alice, map[string]any{"email": "BOB@example.com"}), 409, "conflict")
		r := e.do("PATCH", "/users/alice", alice, map[string]any{"email": "alice@new.example.com"})
		want(t, r, 200)
		if r.str("email") != "alice@new.example.com" {
			t.Errorf("got email %q, want alice@new.example.com", r.str("email"))
		}
		// The old address is free again; the new one is taken.
		want(t, e.do("POST", "/users", userCaller("carol"), map[string]any{"email": "alice@example.com", "name": "Carol"}), 201)
		want(t, e.do("POST", "/users", userCaller("dave"), map[string]any{"email": "Alice@New.Example.com", "name": "Dave"}), 409, "conflict")
		// A change of case only keeps the claim.
		r = e.do("PATCH", "/users/alice", alice, map[string]any{"email": "ALICE@new.example.com"})
		want(t, r, 200)
		want(t, e.do("POST", "/users", userCaller("erin"), map[string]any{"email": "alice@new.example.com", "name": "Erin"}), 409, "conflict")
	})
	t.Run("patch unknown user", func(t *testing.T) {
		want(t, e.do("PATCH", "/users/nobody", adminCaller("root"), map[string]any{"name": "N"}), 404, "not-found")
	})
}
