package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/shared/routes"
)

type recorder struct {
	got  events.APIGatewayV2HTTPRequest
	resp events.APIGatewayV2HTTPResponse
}

func (r *recorder) Handle(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r.got = ev
	return r.resp, nil
}

var secret = []byte("test-secret")

func serve(t *testing.T, rec *recorder) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(Config{Handler: rec, Secret: secret, Routes: routes.All()}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// signedClaims is an HS256 token of claims, signed with the test's secret.
func signedClaims(claims string) string {
	h := b64.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + b64.EncodeToString([]byte(claims))
	return h + "." + b64.EncodeToString(sign(secret, h))
}

func forge(claims string) string {
	h := b64.EncodeToString([]byte(`{"alg":"none"}`))
	return h + "." + b64.EncodeToString([]byte(claims)) + "."
}

func TestGatewayAnswersItself(t *testing.T) {
	rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{}`}}
	srv := serve(t, rec)
	valid, _ := Token(secret, "u1", false, time.Hour)
	expired, _ := Token(secret, "u1", false, -time.Minute)
	other, _ := Token([]byte("another-secret"), "u1", false, time.Hour)
	tests := []struct {
		name, method, path, token string
		want                      int
		body                      string
	}{
		{"undeclared path", "GET", "/nope", "", 404, `{"message":"Not Found"}`},
		{"undeclared method", "DELETE", "/healthz", "", 404, `{"message":"Not Found"}`},
		{"public without token", "GET", "/products/p1", "", 200, `{}`},
		{"protected without token", "GET", "/users/u1", "", 401, `{"message":"Unauthorized"}`},
		{"expired token", "GET", "/users/u1", expired, 401, `{"message":"Unauthorized"}`},
		{"other secret", "GET", "/users/u1", other, 401, `{"message":"Unauthorized"}`},
		{"alg none", "GET", "/users/u1", forge(`{"sub":"u1","exp":9999999999}`), 401, `{"message":"Unauthorized"}`},
		{"garbage", "GET", "/users/u1", "a.b", 401, `{"message":"Unauthorized"}`},
		{"valid token", "GET", "/users/u1", valid, 200, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			code, body := do(t, req)
			if code != tt.want || body != tt.body {
				t.Errorf("got %d %s, want %d %s", code, body, tt.want, tt.body)
			}
		})
	}
}

// TestUnauthorizedSaysWhy: a refused token gets API Gateway's body and the
// authorizer's reason in www-authenticate, and the gateway logs the reason.
func TestUnauthorizedSaysWhy(t *testing.T) {
	var logs bytes.Buffer
	srv := httptest.NewServer(New(Config{Handler: &recorder{}, Secret: secret, Routes: routes.All(),
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}))
	t.Cleanup(srv.Close)
	expired, _ := Token(secret, "u1", false, -time.Minute)
	other, _ := Token([]byte("another-secret"), "u1", false, time.Hour)
	// Signed with the stack's key, but for another app or from another
	// issuer: API Gateway's authorizer checks iss and aud (or client_id
	// when there is no aud) against its configuration.
	otherAud := signedClaims(`{"sub":"u1","exp":9999999999,"iss":"` + Issuer + `","aud":"another-app"}`)
	otherIss := signedClaims(`{"sub":"u1","exp":9999999999,"iss":"https://elsewhere.example","aud":"` + Audience + `"}`)
	noAud := signedClaims(`{"sub":"u1","exp":9999999999,"iss":"` + Issuer + `"}`)
	// API Gateway's authorizer refuses a token whose iat or nbf is after now.
	later := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	future := signedClaims(`{"sub":"u1","exp":9999999999,"iat":` + later + `,"iss":"` + Issuer + `","aud":"` + Audience + `"}`)
	textIat := signedClaims(`{"sub":"u1","exp":9999999999,"iat":"` + later + `","iss":"` + Issuer + `","aud":"` + Audience + `"}`)
	notYet := signedClaims(`{"sub":"u1","exp":9999999999,"nbf":` + later + `,"iss":"` + Issuer + `","aud":"` + Audience + `"}`)
	for _, tt := range []struct {
		name, auth, challenge, reason string
	}{
		{"another audience", "Bearer " + otherAud, `Bearer scope="" error="invalid_token" error_description="the token does not have a valid audience"`, "the token does not have a valid audience"},
		{"no audience", "Bearer " + noAud, `Bearer scope="" error="invalid_token" error_description="the token does not have a valid audience"`, "the token does not have a valid audience"},
		{"another issuer", "Bearer " + otherIss, `Bearer scope="" error="invalid_token" error_description="the token does not have a valid issuer"`, "the token does not have a valid issuer"},
		{"no token", "", `Bearer scope=""`, "no token in the Authorization header"},
		{"only the scheme", "Bearer ", `Bearer scope=""`, "no token in the Authorization header"},
		// The identity source is read as a token, with or without Bearer.
		{"basic", "Basic dTE6cHc=", `Bearer scope="" error="invalid_token" error_description="the token is malformed"`, "the token is malformed"},
		{"issued in the future", "Bearer " + future, `Bearer scope="" error="invalid_token" error_description="the token was issued in the future"`, "the token was issued in the future"},
		{"not valid yet", "Bearer " + notYet, `Bearer scope="" error="invalid_token" error_description="the token is not valid yet"`, "the token is not valid yet"},
		{"iat as text", "Bearer " + textIat, `Bearer scope="" error="invalid_token" error_description="the token's iat claim is not a number"`, "the token's iat claim is not a number"},
		{"expired", "Bearer " + expired, `Bearer scope="" error="invalid_token" error_description="the token has expired"`, "the token has expired"},
		{"other secret", "Bearer " + other, `Bearer scope="" error="invalid_token" error_description="the token does not have a valid signature"`, "the token does not have a valid signature"},
		{"alg none", "Bearer " + forge(`{"sub":"u1","exp":9999999999}`), `Bearer scope="" error="invalid_token" error_description="the token's header is not HS256"`, "the token's header is not HS256"},
		{"garbage", "Bearer a.b", `Bearer scope="" error="invalid_token" error_description="the token is malformed"`, "the token is malformed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs.Reset()
			req, _ := http.NewRequest("GET", srv.URL+"/users/u1", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || string(body) != `{"message":"Unauthorized"}` {
				t.Errorf("got %d %s, want 401 {\"message\":\"Unauthorized\"}", resp.StatusCode, body)
			}
			if got := resp.Header.Get("Www-Authenticate"); got != tt.challenge {
				t.Errorf("www-authenticate: got %s, want %s", got, tt.challenge)
			}
			var line struct{ Msg, Route, Reason, RequestID string }
			if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
				t.Fatalf("log %q: %v", logs.String(), err)
			}
			want := struct{ Msg, Route, Reason, RequestID string }{"unauthorized", "GET /users/{userId}", tt.reason, resp.Header.Get("Apigw-Requestid")}
			if line != want {
				t.Errorf("log line: got %+v, want %+v", line, want)
			}
		})
	}
}

func TestEventCarriesTheRequest(t *testing.T) {
	rec := &recorder{resp: events.APIGatewayV2HTTPResponse{
		StatusCode: 201, Headers: map[string]string{"Content-Type": "application/problem+json"},
		Cookies: []string{"a=1"}, Body: base64.StdEncoding.EncodeToString([]byte("raw")), IsBase64Encoded: true,
	}}
	srv := serve(t, rec)
	tok, _ := Token(secret, "admin-1", true, time.Hour)
	req, _ := http.NewRequest("PUT", srv.URL+"/users/u9/cart/p7?x=1&x=2&y=z", strings.NewReader("\x00\x01"))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Cookie", "s=1; t=2")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	code, body := do(t, req)
	if code != 201 || body != "raw" {
		t.Errorf("response: got %d %q, want 201 %q", code, body, "raw")
	}
	ev := rec.got
	checks := []struct {
		name      string
		got, want any
	}{
		{"version", ev.Version, "2.0"},
		{"routeKey", ev.RouteKey, "PUT /users/{userId}/cart/{productId}"},
		{"rawPath", ev.RawPath, "/users/u9/cart/p7"},
		{"rawQueryString", ev.RawQueryString, "x=1&x=2&y=z"},
		{"query x", ev.QueryStringParameters["x"], "1,2"},
		{"path userId", ev.PathParameters["userId"], "u9"},
		{"path productId", ev.PathParameters["productId"], "p7"},
		{"cookies", strings.Join(ev.Cookies, "|"), "s=1|t=2"},
		{"cookie header removed", ev.Headers["cookie"], ""},
		{"multi header", ev.Headers["x-multi"], "a,b"},
		{"base64 body", ev.Body, base64.StdEncoding.EncodeToString([]byte("\x00\x01"))},
		{"isBase64Encoded", ev.IsBase64Encoded, true},
		{"sub", ev.RequestContext.Authorizer.JWT.Claims["sub"], "admin-1"},
		{"groups", ev.RequestContext.Authorizer.JWT.Claims["cognito:groups"], "[admin]"},
		{"stage", ev.RequestContext.Stage, "$default"},
		{"method", ev.RequestContext.HTTP.Method, "PUT"},
		{"sourceIp", ev.RequestContext.HTTP.SourceIP, "127.0.0.1"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if ev.RequestContext.RequestID == "" {
		t.Errorf("requestId: got empty, want one")
	}
}

func TestGatewayHeaders(t *testing.T) {
	rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{"status":"ok"}`}}
	srv := serve(t, rec)
	req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := rec.got.Headers
	checks := []struct {
		name      string
		got, want any
	}{
		{"x-forwarded-for appends the caller", h["x-forwarded-for"], "203.0.113.7, 127.0.0.1"},
		{"x-forwarded-proto", h["x-forwarded-proto"], "http"},
		{"x-forwarded-port", h["x-forwarded-port"], srv.URL[strings.LastIndex(srv.URL, ":")+1:]},
		{"x-amzn-trace-id", strings.HasPrefix(h["x-amzn-trace-id"], "Root=1-"), true},
		{"apigw-requestid answers the event's request id", resp.Header.Get("Apigw-Requestid"), rec.got.RequestContext.RequestID},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestClaimsOnlyWhereTheAuthorizerIs: on AWS a route without the JWT
// authorizer passes no claims, token or not.
func TestClaimsOnlyWhereTheAuthorizerIs(t *testing.T) {
	rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{}`}}
	srv := serve(t, rec)
	tok, _ := Token(secret, "u1", true, time.Hour)
	tests := []struct {
		path   string
		claims bool
	}{
		{"/products/p1", false},
		{"/search?q=kettle", false},
		{"/users/u1", true},
		{"/orders?status=PLACED", true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec.got = events.APIGatewayV2HTTPRequest{}
			req, _ := http.NewRequest("GET", srv.URL+tt.path, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			if code, _ := do(t, req); code != 200 {
				t.Fatalf("status: got %d, want 200", code)
			}
			if got := rec.got.RequestContext.Authorizer != nil; got != tt.claims {
				t.Errorf("authorizer in the event: got %v, want %v", got, tt.claims)
			}
		})
	}
}

func TestHandlerErrorIsA500(t *testing.T) {
	srv := httptest.NewServer(New(Config{Handler: failing{}, Secret: secret, Routes: routes.All()}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
	if code, body := do(t, req); code != 500 || body != `{"message":"Internal Server Error"}` {
		t.Errorf("got %d %s, want 500", code, body)
	}
}

type failing struct{}

func (failing) Handle(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{}, io.ErrUnexpectedEOF
}

// TestTokenEmailClaim: a dev token carries an email claim (default
// <sub>@example.com, or the one asked for) and the gateway passes it to the
// function as the JWT authorizer passes claims.
func TestTokenEmailClaim(t *testing.T) {
	rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{}`}}
	srv := serve(t, rec)
	def, _ := Token(secret, "u1", false, time.Hour)
	own, _ := TokenFor(secret, Claims{Sub: "u2", Email: "Grace@Example.com"}, time.Hour)
	none, _ := TokenFor(secret, Claims{Sub: "u3", NoEmail: true}, time.Hour)
	unverified, _ := TokenFor(secret, Claims{Sub: "u4", Email: "victim@example.com", Unverified: true}, time.Hour)
	for _, tc := range []struct {
		tok, path, want string
		present         bool
		verified        string
	}{
		{def, "/users/u1", "u1@example.com", true, "true"},
		{own, "/users/u2", "Grace@Example.com", true, "true"},
		{none, "/users/u3", "", false, ""},
		{unverified, "/users/u4", "victim@example.com", true, "false"},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+tc.tok)
		if code, body := do(t, req); code != 200 {
			t.Fatalf("got %d %s, want 200", code, body)
		}
		got, ok := rec.got.RequestContext.Authorizer.JWT.Claims["email"]
		if got != tc.want || ok != tc.present {
			t.Errorf("%s: got email claim %q (present %v), want %q (present %v)", tc.path, got, ok, tc.want, tc.present)
		}
		// API Gateway passes the boolean claim as a string.
		if got := rec.got.RequestContext.Authorizer.JWT.Claims["email_verified"]; got != tc.verified {
			t.Errorf("%s: got email_verified %q, want %q", tc.path, got, tc.verified)
		}
	}
}

// TestPathsAsSent: the gateway matches routes on the path as sent, never
// cleaned and never redirected (ServeMux answered "/users/u1/./cart" with a
// redirect to "/users/u1/cart"). A route whose parameter segment is "." or
// ".." reaches the function with the path as it is; a path that matches no
// route (an empty segment, a dot where a literal segment belongs) is the
// gateway's own 404.
func TestPathsAsSent(t *testing.T) {
	rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 404, Body: `{"type":"not-found"}`}}
	srv := serve(t, rec)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		path      string
		toHandler bool
		param     string
	}{
		{"/products/./reviews", true, "."},
		{"/products/..", true, ".."},
		{"/products/%2e%2e", true, ".."},
		{"/products//reviews", false, ""},
		{"/products/", false, ""},
		{"/healthz/", false, ""},
		{"//healthz", false, ""},
		{"/products/p1/./reviews", false, ""},
		{"/products/p1/reviews/..", false, ""}, // PUT and DELETE only
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec.got = events.APIGatewayV2HTTPRequest{}
			req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 404 || resp.Header.Get("Location") != "" {
				t.Fatalf("got %d (Location %q) %s, want 404 and no redirect", resp.StatusCode, resp.Header.Get("Location"), b)
			}
			switch {
			case tc.toHandler && rec.got.RawPath != tc.path:
				t.Errorf("got rawPath %q at the function, want %q as sent", rec.got.RawPath, tc.path)
			case tc.toHandler && !strings.Contains(string(b), "not-found"):
				t.Errorf("got %s, want the function's answer", b)
			case tc.toHandler:
				var got string
				for _, v := range rec.got.PathParameters {
					got = v
				}
				if got != tc.param && rec.got.PathParameters["userId"] != tc.param {
					t.Errorf("got path parameters %v, want one of them %q", rec.got.PathParameters, tc.param)
				}
			case !tc.toHandler && string(b) != `{"message":"Not Found"}`:
				t.Errorf("got %s, want the gateway's own 404", b)
			case !tc.toHandler && rec.got.RawPath != "":
				t.Errorf("the function got %q, want nothing", rec.got.RawPath)
			}
		})
	}
}

// TestLambdasPayloadLimit: an answer or a request larger than Lambda's
// synchronous payload limit (6,291,556 bytes as JSON) never reaches the
// client or the function; a payload at the limit passes.
func TestLambdasPayloadLimit(t *testing.T) {
	// The response's JSON around a body of n bytes: {"statusCode":200,"headers":null,...}.
	overhead := payloadSize(events.APIGatewayV2HTTPResponse{StatusCode: 200})
	for _, tt := range []struct {
		name string
		body int
		want int
	}{
		{"at the limit", maxResponsePayload - overhead, 200},
		{"one byte over", maxResponsePayload - overhead + 1, 500},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: strings.Repeat("a", tt.body)}}
			if n := payloadSize(rec.resp); (n > maxResponsePayload) != (tt.want == 500) {
				t.Fatalf("payload of %d bytes: the case does not test the limit", n)
			}
			srv := serve(t, rec)
			req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
			code, body := do(t, req)
			if code != tt.want {
				t.Fatalf("got %d, want %d", code, tt.want)
			}
			if tt.want == 500 && body != `{"message":"Internal Server Error"}` {
				t.Errorf("body: got %.80s, want API Gateway's own", body)
			}
			if tt.want == 200 && len(body) != tt.body {
				t.Errorf("body: got %d bytes, want %d", len(body), tt.body)
			}
		})
	}
	t.Run("request at and over the limit", func(t *testing.T) {
		rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{}`}}
		srv := serve(t, rec)
		valid, _ := Token(secret, "admin", true, time.Hour)
		send := func(n int) int {
			rec.got = events.APIGatewayV2HTTPRequest{}
			req, _ := http.NewRequest("POST", srv.URL+"/products", strings.NewReader(strings.Repeat("a", n)))
			req.Header.Set("Authorization", "Bearer "+valid)
			req.Header.Set("Content-Type", "text/plain")
			code, _ := do(t, req)
			return code
		}
		// The event grows byte for byte with a plain body (its
		// content-length header keeps its 7 digits): measure it once.
		const probe = 1_000_000
		if send(probe) != 201 {
			t.Fatal("probe refused")
		}
		at := probe + maxRequestPayload - payloadSize(rec.got)
		if code := send(at); code != 201 || payloadSize(rec.got) != maxRequestPayload {
			t.Errorf("event of %d bytes: got %d, want 201 at %d bytes", payloadSize(rec.got), code, maxRequestPayload)
		}
		if code := send(at + 1); code != 413 || rec.got.RequestContext.RequestID != "" {
			t.Errorf("one byte over: got %d (function invoked: %v), want 413 before the function", code, rec.got.RequestContext.RequestID != "")
		}
	})
	t.Run("request over the limit", func(t *testing.T) {
		rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{}`}}
		srv := serve(t, rec)
		// 7 MB: under API Gateway's 10 MB, over Lambda's 6 MB.
		req, _ := http.NewRequest("POST", srv.URL+"/products", strings.NewReader(`{"name":"`+strings.Repeat("a", 7<<20)+`"}`))
		valid, _ := Token(secret, "admin", true, time.Hour)
		req.Header.Set("Authorization", "Bearer "+valid)
		req.Header.Set("Content-Type", "application/json")
		if code, body := do(t, req); code != 413 || body != `{"message":"Request Entity Too Large"}` {
			t.Errorf("got %d %.80s, want 413 from the gateway", code, body)
		}
		if rec.got.RequestContext.RequestID != "" {
			t.Errorf("the function was invoked with a payload Lambda refuses")
		}
	})
}

type counting struct{ calls int }

func (c *counting) Handle(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	c.calls++
	return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{}`}, nil
}

// The stage's default route throttling: a token bucket per route, full at
// first, refilled at the rate up to the burst, checked before the authorizer.
func TestRouteThrottling(t *testing.T) {
	fn := &counting{}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(New(Config{Handler: fn, Secret: secret, Routes: routes.All(),
		Throttle: &routes.Throttle{Rate: 2, Burst: 3}, Now: func() time.Time { return now }}))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		return do(t, req)
	}
	statuses := func(path string, n int) []int {
		var out []int
		for range n {
			code, _ := get(path)
			out = append(out, code)
		}
		return out
	}
	if got := statuses("/products/p1", 3); !slices.Equal(got, []int{200, 200, 200}) {
		t.Fatalf("a full bucket of 3: got %v, want three 200s", got)
	}
	code, body := get("/products/p1")
	if code != http.StatusTooManyRequests || body != `{"message":"Too Many Requests"}` {
		t.Errorf("an empty bucket: got %d %s, want API Gateway's 429", code, body)
	}
	if fn.calls != 3 {
		t.Errorf("the function ran %d times, want 3 (a throttled request never reaches it)", fn.calls)
	}
	if got := statuses("/products/p2", 1); got[0] != http.StatusTooManyRequests {
		t.Errorf("another product on the same route: got %d, want 429 (the bucket is the route's)", got[0])
	}
	if got := statuses("/search", 1); got[0] != http.StatusOK {
		t.Errorf("another route: got %d, want 200 (each route has its own bucket)", got[0])
	}
	if code, _ := get("/nowhere"); code != http.StatusNotFound {
		t.Errorf("no route: got %d, want the gateway's 404", code)
	}

	// Guarded: the authorizer refuses without a token, and the refusals
	// spend the route's tokens all the same.
	post := func() int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/products", strings.NewReader(`{}`))
		code, _ := do(t, req)
		return code
	}
	var guarded []int
	for range 4 {
		guarded = append(guarded, post())
	}
	if !slices.Equal(guarded, []int{401, 401, 401, 429}) {
		t.Errorf("a guarded route without a token: got %v, want 401 three times, then 429", guarded)
	}

	now = now.Add(500 * time.Millisecond) // 2 a second: one token
	if got := statuses("/products/p1", 2); !slices.Equal(got, []int{200, 429}) {
		t.Errorf("half a second later: got %v, want one 200, then 429", got)
	}
	now = now.Add(time.Minute) // refilled up to the burst, not beyond
	if got := statuses("/products/p1", 4); !slices.Equal(got, []int{200, 200, 200, 429}) {
		t.Errorf("a minute later: got %v, want the burst of 3, then 429", got)
	}
}

func TestNoThrottleWithoutSettings(t *testing.T) {
	fn := &counting{}
	srv := httptest.NewServer(New(Config{Handler: fn, Secret: secret, Routes: routes.All()}))
	t.Cleanup(srv.Close)
	for i := range 50 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/products/p1", nil)
		if code, _ := do(t, req); code != http.StatusOK {
			t.Fatalf("request %d: got %d, want 200", i, code)
		}
	}
}

// TestTokenWithOrWithoutBearer: the authorizer reads the Authorization
// header's token alone or after "Bearer ", as API Gateway's JWT authorizer
// does; a token alone was refused (401), where AWS lets it through.
func TestTokenWithOrWithoutBearer(t *testing.T) {
	tok, _ := Token(secret, "u1", false, time.Hour)
	for _, auth := range []string{"Bearer " + tok, tok} {
		rec := &recorder{resp: events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "{}"}}
		srv := serve(t, rec)
		req, _ := http.NewRequest("GET", srv.URL+"/users/u1", nil)
		req.Header.Set("Authorization", auth)
		if status, body := do(t, req); status != 200 {
			t.Errorf("%.12s…: got %d %s, want 200", auth, status, body)
			continue
		}
		if sub := rec.got.RequestContext.Authorizer.JWT.Claims["sub"]; sub != "u1" {
			t.Errorf("%.12s…: claims %v, want sub u1", auth, rec.got.RequestContext.Authorizer.JWT.Claims)
		}
	}
}
