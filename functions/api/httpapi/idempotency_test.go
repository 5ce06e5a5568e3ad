package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/shared/tables"
)

func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("ida")
	ida := userCaller("ida")
	p := e.mustProduct("Lamp", "lighting", 2500, 100)
	body := map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 1}}}
	count := func() int {
		t.Helper()
		r := e.do("GET", "/users/ida/orders?limit=100", ida, nil)
		want(t, r, 200)
		return len(r.items())
	}

	t.Run("sequential replay returns the first response", func(t *testing.T) {
		first := e.do("POST", "/users/ida/orders", ida, body, "Idempotency-Key", "k-seq")
		want(t, first, 201)
		again := e.do("POST", "/users/ida/orders", ida, body, "Idempotency-Key", "k-seq")
		want(t, again, 201)
		if again.Body != first.Body || again.Headers["location"] != first.Headers["location"] {
			t.Errorf("got replay %s, want %s", again.Body, first.Body)
		}
		if again.Headers["idempotent-replayed"] != "true" {
			t.Errorf("got headers %v, want Idempotent-Replayed: true", again.Headers)
		}
		if n := count(); n != 1 {
			t.Errorf("got %d orders, want 1", n)
		}
		if s := e.stock(p); s != 99 {
			t.Errorf("got stock %d, want 99", s)
		}
	})
	t.Run("another body gets 409", func(t *testing.T) {
		other := map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 2}}}
		want(t, e.do("POST", "/users/ida/orders", ida, other, "Idempotency-Key", "k-seq"), 409, "conflict")
	})
	t.Run("keys are per user", func(t *testing.T) {
		e.mustUser("joe")
		want(t, e.do("POST", "/users/joe/orders", userCaller("joe"), body, "Idempotency-Key", "k-seq"), 201)
	})
	t.Run("concurrent replays place one order", func(t *testing.T) {
		before := count()
		const n = 16
		resps := make([]response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				resps[i] = e.do("POST", "/users/ida/orders", ida, body, "Idempotency-Key", "k-concurrent")
			})
		}
		wg.Wait()
		for _, r := range resps {
			if r.StatusCode != 201 || r.Body != resps[0].Body {
				t.Errorf("got %d %s, want 201 %s", r.StatusCode, r.Body, resps[0].Body)
			}
		}
		if got := count(); got != before+1 {
			t.Errorf("got %d orders, want %d", got, before+1)
		}
	})
	t.Run("a refusal is remembered too", func(t *testing.T) {
		big := map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 500}}}
		r := e.do("POST", "/users/ida/orders", ida, big, "Idempotency-Key", "k-short")
		want(t, r, 409, "conflict")
		want(t, e.do("PATCH", "/products/"+p, adminCaller("root"), map[string]any{"stockDelta": 1000}), 200)
		again := e.do("POST", "/users/ida/orders", ida, big, "Idempotency-Key", "k-short")
		want(t, again, 409, "conflict")
		if again.Body != r.Body {
			t.Errorf("got %s, want the first answer %s", again.Body, r.Body)
		}
		want(t, e.do("POST", "/users/ida/orders", ida, big, "Idempotency-Key", "k-short-2"), 201)
	})
	t.Run("invalid keys", func(t *testing.T) {
		long := make([]byte, 256)
		for i := range long {
			long[i] = 'k'
		}
		want(t, e.do("POST", "/users/ida/orders", ida, body, "Idempotency-Key", string(long)), 400, "validation")
		want(t, e.do("POST", "/users/ida/orders", ida, body, "Idempotency-Key", "bad\x01key"), 400, "validation")
		want(t, e.do("POST", "/users/ida/orders", ida, body, "Idempotency-Key", "bad key"), 400, "validation")
		// Sent empty, it is a key that is not one (a client whose key
		// variable was empty), not a request without a key: two such
		// requests placed two orders.
		want(t, e.do("POST", "/users/ida/orders", ida, body, "Idempotency-Key", ""), 400, "validation")
	})
}

// TestIdempotencyKeysDoNotAlias: user "a" with key "b#c" and user "a#b" with
// key "c" hold two records; each gets its own order.
func TestIdempotencyKeysDoNotAlias(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("a")
	e.mustUser("a#b")
	p := e.mustProduct("Pen", "office", 100, 10)
	body := map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 1}}}
	first := e.do("POST", "/users/a/orders", userCaller("a"), body, "Idempotency-Key", "b#c")
	want(t, first, 201)
	second := e.do("POST", "/users/a%23b/orders", userCaller("a#b"), body, "Idempotency-Key", "c")
	want(t, second, 201)
	if second.str("userId") != "a#b" || second.str("orderId") == first.str("orderId") || second.Headers["idempotent-replayed"] != "" {
		t.Errorf("got %s (replayed %q), want a new order of a#b", second.Body, second.Headers["idempotent-replayed"])
	}
	// The Location is a path: the user id escaped, so "#" is not a fragment.
	if loc, want := second.Headers["location"], "/users/a%23b/orders/"+second.str("orderId"); loc != want {
		t.Errorf("got Location %q, want %q", loc, want)
	}
	if s := e.stock(p); s != 8 {
		t.Errorf("got stock %d, want 8 (two orders)", s)
	}
}

// TestKeptResponseLayout: the response kept under an Idempotency-Key is the
// item's "response" map of status, contentType, location and body, the
// layout release 0.2.0 reads: a replay during a canary may reach it.
func TestKeptResponseLayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("kai")
	p := e.mustProduct("Lamp", "lighting", 2500, 100)
	first := e.do("POST", "/users/kai/orders", userCaller("kai"), map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 1}}}, "Idempotency-Key", "k-layout")
	want(t, first, 201)
	out, err := e.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(tables.Physical(e.prefix, tables.IdempotencyKeys)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var kept []struct {
		Response struct {
			Status      int    `dynamodbav:"status"`
			ContentType string `dynamodbav:"contentType"`
			Location    string `dynamodbav:"location"`
			Body        string `dynamodbav:"body"`
		} `dynamodbav:"response"`
	}
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &kept); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, k := range kept {
		r := k.Response
		if r.Location == first.Headers["location"] {
			found = true
			if r.Status != 201 || r.ContentType != "application/json" || r.Body != first.Body {
				t.Errorf("got kept response %+v, want 201 application/json with the first body", r)
			}
		}
	}
	if !found {
		t.Fatalf("no kept response with location %s among %d items", first.Headers["location"], len(kept))
	}
}

// TestKeptRefusalOfAnIDNoProductHasIsReplayed: an order naming a product id
// no product can have is a 400 since 0.19.0, and was a 409 "no longer
// available" before, which the Idempotency-Key kept. A retry of the same
// body with that key gets the kept 409 again, as the contract promises for
// 24 h; without a kept answer the body gets the 400, which is not kept.
func TestKeptRefusalOfAnIDNoProductHasIsReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("kai")
	kai := userCaller("kai")
	body := `{"items":[{"productId":"nope","quantity":1}]}`
	// The record 0.18.0 kept: its key is the route, the user and the key,
	// each after its length; its hash the body's.
	record := ""
	for _, part := range []string{"orders", "kai", "k-old"} {
		record += strconv.Itoa(len(part)) + ":" + part
	}
	sum := sha256.Sum256([]byte(body))
	refusal := `{"type":"conflict","title":"Conflict","status":409,"detail":"no longer available: nope","products":["nope"]}`
	kept, err := attributevalue.Marshal(map[string]any{"status": 409, "contentType": "application/problem+json", "body": refusal})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Remember(context.Background(), record, hex.EncodeToString(sum[:]), kept); err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", "/users/kai/orders", kai, body, "Idempotency-Key", "k-old")
	if r.StatusCode != 409 || r.Body != refusal || r.Headers["idempotent-replayed"] != "true" {
		t.Errorf("the kept refusal: got %d %s (replayed %q), want it again", r.StatusCode, r.Body, r.Headers["idempotent-replayed"])
	}
	for range 2 {
		want(t, e.do("POST", "/users/kai/orders", kai, body, "Idempotency-Key", "k-new"), 400, "validation")
	}
}
