package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/cursor"
)

// testSecret signs the cursors of the handlers under test.
const testSecret = "test-cursor-secret-0123456789"

// env is a handler on fresh tables of the shared local stack.
type env struct {
	t       testing.TB
	h       *httpapi.Handler
	st      *store.Store
	db      *dynamodb.Client
	prefix  string
	metrics *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newEnv creates every table under a fresh prefix and a handler on them.
func newEnv(tb testing.TB) *env {
	tb.Helper()
	return newEnvWith(tb, nil)
}

// newEnvWith is newEnv with a say in the store's configuration and, with
// deps, in the handler's.
func newEnvWith(tb testing.TB, configure func(*store.Config), deps ...func(*httpapi.Deps)) *env {
	tb.Helper()
	prefix := stacktest.Tables(tb)
	db := stacktest.DynamoDB(tb)
	cfg := store.Config{Tables: store.TablesWithPrefix(prefix)}
	if configure != nil {
		configure(&cfg)
	}
	e := &env{t: tb, db: db, prefix: prefix, metrics: &syncBuffer{}}
	return e.instance(store.New(db, cfg), deps...)
}

// instance is another API instance on e's tables: a handler on st (its own
// store: its own caches, or a client of its own), sharing e's metrics.
func (e *env) instance(st *store.Store, deps ...func(*httpapi.Deps)) *env {
	other := *e
	other.st = st
	d := httpapi.Deps{
		Store: st, Cursors: cursor.NewSigner([]byte(testSecret)), Metrics: e.metrics,
		Logger: slog.New(slog.NewTextHandler(testLog{e.t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, f := range deps {
		f(&d)
	}
	other.h = httpapi.New(d)
	return &other
}

// testLog sends log lines to the test's log.
type testLog struct{ tb testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// caller is who sends a request: its token's sub, cognito:groups and email
// claims (email defaults to <sub>@example.com; noEmail leaves it out).
type caller struct {
	sub     string
	groups  string
	email   string
	noEmail bool
	// unverified: email_verified "false", as Cognito's token after an
	// address change not yet confirmed.
	unverified bool
}

var anonymous = caller{}

func userCaller(id string) caller  { return caller{sub: id} }
func adminCaller(id string) caller { return caller{sub: id, groups: "[admin]"} }

var reqSeq atomic.Int64

// event builds the API Gateway event of a request. target is a path with an
// optional query; body is JSON-encoded unless it is a string or []byte.
func event(method, target string, who caller, body any, headers ...string) events.APIGatewayV2HTTPRequest {
	path, query, _ := strings.Cut(target, "?")
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, RawQueryString: query,
		Headers: map[string]string{"host": "api.example.com"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", RequestID: fmt.Sprintf("req-%d", reqSeq.Add(1)),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, SourceIP: "127.0.0.1"},
		},
	}
	if q, err := url.ParseQuery(query); err == nil && len(q) > 0 {
		ev.QueryStringParameters = map[string]string{}
		for k, v := range q {
			ev.QueryStringParameters[k] = strings.Join(v, ",")
		}
	}
	if who.sub != "" {
		claims := map[string]string{"sub": who.sub}
		switch {
		case who.noEmail:
		case who.email != "":
			claims["email"] = who.email
		default:
			claims["email"] = who.sub + "@example.com"
		}
		if !who.noEmail {
			// API Gateway passes the claim as a string.
			claims["email_verified"] = fmt.Sprint(!who.unverified)
		}
		if who.groups != "" {
			claims["cognito:groups"] = who.groups
		}
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
		}
	}
	switch b := body.(type) {
	case nil:
	case string:
		ev.Body = b
	case []byte:
		ev.Body = string(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			panic(err)
		}
		ev.Body = string(raw)
	}
	if ev.Body != "" {
		ev.Headers["content-type"] = "application/json"
	}
	for i := 0; i+1 < len(headers); i += 2 {
		ev.Headers[strings.ToLower(headers[i])] = headers[i+1]
	}
	return ev
}

// response is an answer with its JSON body decoded.
type response struct {
	events.APIGatewayV2HTTPResponse
	json map[string]any
}

func (r response) str(key string) string {
	s, _ := r.json[key].(string)
	return s
}

func (r response) num(key string) float64 {
	n, _ := r.json[key].(float64)
	return n
}

func (r response) items() []map[string]any {
	raw, _ := r.json["items"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, it := range raw {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

// do sends a request through Handle.
func (e *env) do(method, target string, who caller, body any, headers ...string) response {
	e.t.Helper()
	return e.send(event(method, target, who, body, headers...))
}

func (e *env) send(ev events.APIGatewayV2HTTPRequest) response {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := e.h.Handle(ctx, ev)
	if err != nil {
		e.t.Fatalf("Handle %s %s: %v", ev.RequestContext.HTTP.Method, ev.RawPath, err)
	}
	out := response{APIGatewayV2HTTPResponse: resp}
	if resp.Body != "" {
		if err := json.Unmarshal([]byte(resp.Body), &out.json); err != nil {
			e.t.Fatalf("%s %s: body is not a JSON object: %v: %s", ev.RequestContext.HTTP.Method, ev.RawPath, err, resp.Body)
		}
	}
	if resp.StatusCode >= 400 {
		checkProblem(e.t, ev, out)
	}
	return out
}

// checkProblem checks an error response against docs/contract.md#2-http-api.
func checkProblem(tb testing.TB, ev events.APIGatewayV2HTTPRequest, r response) {
	tb.Helper()
	if ct := r.Headers["content-type"]; ct != "application/problem+json" {
		tb.Errorf("%s %s: content-type %q, want application/problem+json", ev.RequestContext.HTTP.Method, ev.RawPath, ct)
	}
	if got := int(r.num("status")); got != r.StatusCode {
		tb.Errorf("%s %s: problem status %d, want %d", ev.RequestContext.HTTP.Method, ev.RawPath, got, r.StatusCode)
	}
	if r.str("type") == "" || r.str("title") == "" || r.str("detail") == "" {
		tb.Errorf("%s %s: problem lacks type, title or detail: %s", ev.RequestContext.HTTP.Method, ev.RawPath, r.Body)
	}
}

// want fails the test unless r has the status (and, for errors, the problem type).
func want(tb testing.TB, r response, status int, problemType ...string) {
	tb.Helper()
	if r.StatusCode != status {
		tb.Fatalf("got status %d, want %d: %s", r.StatusCode, status, r.Body)
	}
	if len(problemType) > 0 && r.str("type") != problemType[0] {
		tb.Fatalf("got problem type %q, want %q: %s", r.str("type"), problemType[0], r.Body)
	}
}

// mustUser registers a user.
func (e *env) mustUser(id string) {
	e.t.Helper()
	want(e.t, e.do("POST", "/users", userCaller(id), map[string]any{"email": id + "@example.com", "name": "User " + id}), 201)
}

// mustProduct creates a product and returns its id.
func (e *env) mustProduct(name, category string, priceCents, stock int) string {
	e.t.Helper()
	r := e.do("POST", "/products", adminCaller("boss"), map[string]any{
		"name": name, "description": "A " + name, "category": category, "priceCents": priceCents, "stock": stock,
	})
	want(e.t, r, 201)
	id := r.str("productId")
	// A shopper meets a product through its page: wait until eventually
	// consistent reads see it (the local stack lags them as AWS may).
	e.visible("/products/" + id)
	return id
}

// staleReads is how long the local stack's eventually consistent reads may
// lag a write, with a margin for the front to register the write after
// answering it.
const staleReads = ddbfront.DefaultStaleReads + 30*time.Millisecond

// visible waits until a public page answers 200.
func (e *env) visible(path string) { e.eventually(path, 200) }

// eventually waits until a public page answers status: what eventually
// consistent reads show of a write once they catch up.
func (e *env) eventually(path string, status int) response {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := e.do("GET", path, anonymous, nil)
		if r.StatusCode == status {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("GET %s: got %d after 5 s, want %d", path, r.StatusCode, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mustOrder places an order and returns its id.
func (e *env) mustOrder(userID string, items ...any) string {
	e.t.Helper()
	var lines []map[string]any
	for i := 0; i+1 < len(items); i += 2 {
		lines = append(lines, map[string]any{"productId": items[i], "quantity": items[i+1]})
	}
	r := e.do("POST", "/users/"+userID+"/orders", userCaller(userID), map[string]any{"items": lines})
	want(e.t, r, 201)
	return r.str("orderId")
}

// stock is a product's stock as its page shows it once eventually
// consistent reads have caught up with the writes before the call.
func (e *env) stock(productID string) int {
	e.t.Helper()
	time.Sleep(staleReads)
	r := e.do("GET", "/products/"+productID, anonymous, nil)
	want(e.t, r, 200)
	return int(r.num("stock"))
}
