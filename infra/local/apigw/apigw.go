// Package apigw emulates API Gateway's HTTP API (payload format 2.0) in front
// of an in-process handler: it answers undeclared routes and missing or invalid
// tokens itself, as the gateway and its JWT authorizer do, and hands everything
// else to the handler as a real events.APIGatewayV2HTTPRequest.
package apigw

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/shared/routes"
)

// Invoker is the function behind the API.
type Invoker interface {
	Handle(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
}

// Config configures the gateway.
type Config struct {
	Handler Invoker
	// Secret verifies HS256 bearer tokens.
	Secret []byte
	Routes []routes.Route
	// Throttle, when set, is the stage's default route throttling: each
	// route's token bucket (routes.Throttle). Nil throttles nothing.
	Throttle *routes.Throttle
	Logger   *slog.Logger
	Now      func() time.Time
}

// maxBody is API Gateway's payload limit.
const maxBody = 10 << 20

// Lambda's limits on a synchronous invocation ("Invocation payload (request
// and response): 6 MB each", Lambda quotas,
// https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html),
// in bytes of JSON as its errors name them: a request must be smaller than
// 6291456 bytes, and a response over 6291556 fails with
// Function.ResponseSizeTooLarge.
const (
	maxRequestPayload  = 6291456 - 1
	maxResponsePayload = 6291556
)

// measureFrom is the body size from which a payload is measured as JSON: a
// smaller body with its headers cannot reach the limits however its
// characters are escaped (at most six bytes each).
const measureFrom = maxRequestPayload / 8

// payloadSize is v's size as Lambda carries it: JSON, without HTML
// escaping, as the Go runtime encodes a response.
func payloadSize(v any) int {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return 0
	}
	return b.Len() - 1 // Encode's newline
}

type gateway struct {
	cfg    Config
	routes []compiled
}

// compiled is a declared route split into its path segments, with its
// token bucket when the stage is throttled.
type compiled struct {
	rt     routes.Route
	segs   []string
	bucket *bucket
}

// New returns the gateway as an http.Handler.
func New(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &gateway{cfg: cfg}
	for _, rt := range cfg.Routes {
		c := compiled{rt: rt, segs: strings.Split(strings.TrimPrefix(rt.Path, "/"), "/")}
		if cfg.Throttle != nil {
			c.bucket = &bucket{limit: *cfg.Throttle}
		}
		g.routes = append(g.routes, c)
	}
	return g
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, params, ok := g.match(r)
	if !ok {
		gatewayError(w, http.StatusNotFound, "Not Found")
		return
	}
	if c.bucket != nil && !c.bucket.take(g.cfg.Now()) {
		// Throttling comes before the authorizer: a refused request
		// reaches neither it nor the function.
		gatewayError(w, http.StatusTooManyRequests, "Too Many Requests")
		return
	}
	g.serve(w, r, c.rt, params)
}

// bucket is one route's token bucket: it starts full, holds limit.Burst
// requests and refills at limit.Rate a second ("Throttling requests to your
// HTTP API", API Gateway developer guide).
type bucket struct {
	limit  routes.Throttle
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take spends a token, or reports false when the bucket holds less than one.
func (b *bucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.tokens = float64(b.limit.Burst)
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(float64(b.limit.Burst), b.tokens+d.Seconds()*float64(b.limit.Rate))
	}
	if now.After(b.last) {
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// match finds the declared route of the request as API Gateway does: by
// method (HEAD is not GET) and segment by segment on the path as sent, never
// cleaned, so nothing is redirected. A {name} segment takes any non-empty
// segment, "." and ".." included (the function then answers for them); a
// path that no route matches, an empty segment where a route has a
// parameter for instance, is the gateway's own 404.
func (g *gateway) match(r *http.Request) (*compiled, map[string]string, bool) {
	raw := r.URL.EscapedPath()
	if !strings.HasPrefix(raw, "/") {
		return nil, nil, false
	}
	parts := strings.Split(raw[1:], "/")
	segs := make([]string, len(parts))
	for i, p := range parts {
		seg, err := url.PathUnescape(p)
		if err != nil {
			return nil, nil, false
		}
		segs[i] = seg
	}
next:
	for i := range g.routes {
		c := &g.routes[i]
		if c.rt.Method != r.Method || len(c.segs) != len(segs) {
			continue
		}
		var params map[string]string
		for i, want := range c.segs {
			name, isParam := strings.CutPrefix(want, "{")
			switch {
			case isParam && segs[i] != "":
				if params == nil {
					params = map[string]string{}
				}
				params[strings.TrimSuffix(name, "}")] = segs[i]
			case isParam || want != segs[i]:
				continue next
			}
		}
		return c, params, true
	}
	return nil, nil, false
}

// gatewayError answers with API Gateway's own body and returns the
// request id it gave the answer.
func gatewayError(w http.ResponseWriter, status int, msg string) string {
	id := requestID()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Apigw-Requestid", id)
	w.WriteHeader(status)
	io.WriteString(w, `{"message":"`+msg+`"}`)
	return id
}

// unauthorized answers a guarded route's request without a valid token as
// API Gateway's JWT authorizer does: 401 with the gateway's body
// {"message":"Unauthorized"}, and the reason in www-authenticate (RFC 6750:
// error="invalid_token" and its description for a token that fails, no
// error for a request without one). The reason is logged with the request id.
func (g *gateway) unauthorized(w http.ResponseWriter, r *http.Request, rt routes.Route, reason error) {
	challenge := `Bearer scope=""`
	if !errors.Is(reason, errNoToken) {
		challenge += ` error="invalid_token" error_description="` + strings.ReplaceAll(reason.Error(), `"`, `'`) + `"`
	}
	w.Header().Set("Www-Authenticate", challenge)
	id := gatewayError(w, http.StatusUnauthorized, "Unauthorized")
	g.cfg.Logger.InfoContext(r.Context(), "unauthorized", "route", rt.Method+" "+rt.Path, "reason", reason.Error(), "requestId", id)
}

// errNoToken is the reason of a request without a bearer token.
var errNoToken = errors.New("no token in the Authorization header")

func requestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b) + "="
}

func (g *gateway) serve(w http.ResponseWriter, r *http.Request, rt routes.Route, params map[string]string) {
	// Only guarded routes have the JWT authorizer: a public route's event
	// carries no claims even when the request has a token.
	var claims map[string]string
	if rt.NeedsToken() {
		c, err := g.claims(r)
		if err != nil {
			g.unauthorized(w, r, rt, err)
			return
		}
		claims = c
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		gatewayError(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > maxBody {
		gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	ev := g.event(r, rt, params, body, claims)
	if len(ev.Body) >= measureFrom {
		if n := payloadSize(ev); n > maxRequestPayload {
			// Lambda refuses the invocation; the function never runs.
			g.cfg.Logger.WarnContext(r.Context(), "request payload too large for Lambda", "requestId", ev.RequestContext.RequestID, "bytes", n, "limit", maxRequestPayload)
			gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
			return
		}
	}
	resp, err := g.cfg.Handler.Handle(r.Context(), ev)
	if err != nil {
		g.cfg.Logger.ErrorContext(r.Context(), "handler failed", "requestId", ev.RequestContext.RequestID, "err", err.Error())
		gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	if len(resp.Body) >= measureFrom {
		if n := payloadSize(resp); n > maxResponsePayload {
			// The function ran (its writes stay), but Lambda refuses to
			// return its answer: the client gets the integration's error.
			g.cfg.Logger.ErrorContext(r.Context(), "handler failed", "requestId", ev.RequestContext.RequestID,
				"err", "Function.ResponseSizeTooLarge: response payload size exceeded maximum allowed payload size", "bytes", n, "limit", maxResponsePayload)
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
	}
	w.Header().Set("Apigw-Requestid", ev.RequestContext.RequestID)
	writeResponse(w, resp)
}

// claims returns the verified token's claims; errNoToken when the request
// carries none, else why the token is refused.
func (g *gateway) claims(r *http.Request) (map[string]string, error) {
	// The identity source holds the token alone or after "Bearer ", as
	// API Gateway's JWT authorizer reads it ("Control access to HTTP APIs
	// with JWT authorizers", API Gateway developer guide).
	h := r.Header.Get("Authorization")
	tok, _ := strings.CutPrefix(h, "Bearer ")
	if tok = strings.TrimSpace(tok); tok == "" || tok == "Bearer" {
		return nil, errNoToken
	}
	return verify(g.cfg.Secret, tok, g.cfg.Now())
}

func (g *gateway) event(r *http.Request, rt routes.Route, params map[string]string, body []byte, claims map[string]string) events.APIGatewayV2HTTPRequest {
	now := g.cfg.Now()
	headers := map[string]string{}
	var cookies []string
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			for _, v := range vs {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	headers["host"] = r.Host
	// What API Gateway adds on its way to the function.
	if xff := headers["x-forwarded-for"]; xff != "" {
		headers["x-forwarded-for"] = xff + ", " + sourceIP(r)
	} else {
		headers["x-forwarded-for"] = sourceIP(r)
	}
	headers["x-forwarded-proto"] = "http"
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		headers["x-forwarded-port"] = port
	}
	headers["x-amzn-trace-id"] = traceID(now)
	if r.ContentLength > 0 || len(body) > 0 {
		headers["content-length"] = strconv.Itoa(len(body))
	}
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = map[string]string{}
		for k, vs := range q {
			query[k] = strings.Join(vs, ",")
		}
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              rt.Pattern(),
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     rt.Pattern(),
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    requestID(),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: "local",
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP(r),
				UserAgent: r.UserAgent(),
			},
		},
	}
	if claims != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims, Scopes: nil},
		}
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type")) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev
}

// traceID is an X-Ray trace header: Root=1-<epoch seconds, hex>-<96 random bits>.
func traceID(now time.Time) string {
	b := make([]byte, 12)
	rand.Read(b)
	return "Root=1-" + strconv.FormatInt(now.Unix(), 16) + "-" + hex.EncodeToString(b)
}

func sourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// isText mirrors API Gateway: text and JSON-like bodies pass as they are,
// everything else base64-encoded.
func isText(contentType string) bool {
	if contentType == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "json") || strings.HasSuffix(mt, "+xml") ||
		mt == "application/xml" || mt == "application/javascript" || mt == "application/x-www-form-urlencoded"
}

func writeResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	h := w.Header()
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	if h.Get("Content-Type") == "" && resp.Body != "" {
		h.Set("Content-Type", "application/json")
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = b
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	w.Write(body)
}
