package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/routes"
)

// wire sends real HTTP requests through the local API Gateway emulation to
// the handler on the local stack and validates every exchange against
// docs/openapi.yaml.
type wire struct {
	t      *testing.T
	url    string
	doc    *openapi3.T
	router routers.Router
	client *http.Client
	secret []byte
	seen   map[string]bool // operationIds exercised
}

// exchange is one answered request.
type exchange struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

func (x exchange) str(k string) string { s, _ := x.json[k].(string); return s }

// TestWireMatchesOpenAPI: every operation of docs/openapi.yaml, and the
// gateway's own answers (401 without a token, 404 for a request no route
// matches), as the running system answers them over HTTP, validate against
// the document: status documented, body and headers matching the schema of
// the content type actually sent.
func TestWireMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.h = httpapi.New(httpapi.Deps{
		Store: e.st, Cursors: cursor.NewSigner([]byte(testSecret)), Metrics: e.metrics,
		Search: &productsearch.Client{URL: stacktest.Stack(t).SearchURL, Index: strings.TrimSuffix(e.prefix, "-") + "-products"},
	})
	secret := []byte("wire-test-secret")
	srv := httptest.NewServer(apigw.New(apigw.Config{Handler: e.h, Secret: secret, Routes: routes.All()}))
	t.Cleanup(srv.Close)

	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: srv.URL}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{
		t: t, url: srv.URL, doc: doc, router: router, secret: secret, seen: map[string]bool{},
		client: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
	admin := apigw.Claims{Sub: "wire-admin", Admin: true}
	wes, zed := apigw.Claims{Sub: "wes"}, apigw.Claims{Sub: "zed"}
	none := apigw.Claims{}

	// The gateway's own answers.
	w.send(401, "GET", "/users/wes", none, nil)
	w.sendToken(401, "GET", "/users/wes", "not.a.token", nil)
	w.send(404, "GET", "/nowhere", none, nil)
	w.send(404, "DELETE", "/healthz", none, nil)
	w.send(404, "GET", "/products//reviews", none, nil)

	w.send(200, "GET", "/healthz", none, nil)
	w.send(201, "POST", "/users", wes, map[string]any{"name": "Wes"})
	w.send(201, "POST", "/users", zed, map[string]any{"email": "ZED@example.com", "name": "Zed"})
	w.send(409, "POST", "/users", wes, map[string]any{"name": "Wes"})
	w.send(403, "POST", "/users", apigw.Claims{Sub: "mal"}, map[string]any{"email": "wes@example.com", "name": "M"})
	w.send(400, "POST", "/users", apigw.Claims{Sub: "val"}, map[string]any{"name": ""})
	w.send(200, "GET", "/users/wes", wes, nil)
	w.send(403, "GET", "/users/wes", zed, nil)
	w.send(404, "GET", "/users/"+strings.Repeat("u", 200), admin, nil)
	w.send(200, "PATCH", "/users/wes", wes, map[string]any{"name": "Wes W"})
	w.send(412, "PATCH", "/users/wes", wes, map[string]any{"name": "Wes X"}, "If-Match", "9")
	w.send(413, "PATCH", "/users/wes", wes, map[string]any{"name": strings.Repeat("x", 65<<10)})

	p := w.send(201, "POST", "/products", admin, map[string]any{"name": "Lamp", "description": "Bright", "category": "wire", "priceCents": 1500, "stock": 10}).str("productId")
	p2 := w.send(201, "POST", "/products", admin, map[string]any{"name": "Desk", "category": "wire", "priceCents": 9000, "stock": 2}).str("productId")
	w.send(400, "POST", "/products", admin, map[string]any{"name": "", "category": "wire"})
	w.send(403, "POST", "/products", wes, map[string]any{"name": "N", "category": "wire", "priceCents": 1, "stock": 1})
	time.Sleep(staleReads) // the public reads below are eventually consistent
	page := w.send(200, "GET", "/products?category=wire&limit=1", none, nil)
	w.send(200, "GET", "/products?category=wire&limit=1&cursor="+page.str("nextCursor"), none, nil)
	w.send(400, "GET", "/products?category=wire&cursor=forged.cursor", none, nil)
	w.send(400, "GET", "/products", none, nil)
	w.send(200, "GET", "/products/"+p, none, nil)
	w.send(404, "GET", "/products/"+strings.Repeat("A", 3000), none, nil)
	w.send(404, "GET", "/products/01ARZ3NDEKTSV4RRFFQ69G5FAV", none, nil)
	w.send(404, "GET", "/products/%2e/reviews", none, nil)
	w.send(200, "PATCH", "/products/"+p, admin, map[string]any{"stockDelta": 5})
	w.send(400, "PATCH", "/products/"+p, admin, map[string]any{"stock": 3})
	w.send(409, "PATCH", "/products/"+p, admin, map[string]any{"stockDelta": -1000})
	w.send(412, "PATCH", "/products/"+p, admin, map[string]any{"stock": 3}, "If-Match", "1")
	w.send(200, "GET", "/search?q=lamp", none, nil)
	w.send(400, "GET", "/search", none, nil)

	w.send(201, "PUT", "/products/"+p+"/reviews/wes", wes, map[string]any{"rating": 5, "title": "Good"})
	w.send(200, "PUT", "/products/"+p+"/reviews/wes", wes, map[string]any{"rating": 4, "title": "Fine", "body": "ok"})
	w.send(404, "PUT", "/products/01ARZ3NDEKTSV4RRFFQ69G5FAV/reviews/wes", wes, map[string]any{"rating": 4, "title": "Fine"})
	w.send(200, "GET", "/products/"+p+"/reviews", none, nil)
	w.send(200, "GET", "/users/wes/reviews", wes, nil)

	w.send(200, "PUT", "/users/wes/cart/"+p2, wes, map[string]any{"quantity": 1})
	w.send(200, "GET", "/users/wes/cart", wes, nil)
	w.send(201, "POST", "/users/wes/orders", wes, map[string]any{"fromCart": true})
	o := w.send(201, "POST", "/users/wes/orders", wes, map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 2}}}, "Idempotency-Key", "wire-1").str("orderId")
	w.send(201, "POST", "/users/wes/orders", wes, map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 2}}}, "Idempotency-Key", "wire-1")
	w.send(409, "POST", "/users/wes/orders", wes, map[string]any{"items": []any{map[string]any{"productId": p2, "quantity": 50}}})
	o2 := w.send(201, "POST", "/users/wes/orders", wes, map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 1}}}).str("orderId")
	w.send(200, "GET", "/users/wes/orders?status=PLACED&limit=2", wes, nil)
	w.send(200, "GET", "/users/wes/orders/"+o, wes, nil)
	w.send(404, "GET", "/users/wes/orders/not-an-order", wes, nil)
	w.send(200, "GET", "/orders?status=PLACED", admin, nil)
	w.send(403, "GET", "/orders?status=PLACED", wes, nil)
	w.send(200, "PATCH", "/users/wes/orders/"+o, admin, map[string]any{"status": "SHIPPED"})
	w.send(409, "POST", "/users/wes/orders/"+o+"/cancel", wes, nil)
	w.send(200, "POST", "/users/wes/orders/"+o2+"/cancel", wes, nil)
	w.send(204, "DELETE", "/products/"+p+"/reviews/wes", wes, nil)
	w.send(204, "DELETE", "/products/"+p2, admin, nil)

	var missing []string
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if !w.seen[op.OperationID] {
				missing = append(missing, op.OperationID)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("operations not exercised on the wire: %v", missing)
	}
}

func (w *wire) send(status int, method, path string, who apigw.Claims, body any, headers ...string) exchange {
	w.t.Helper()
	tok := ""
	if who.Sub != "" {
		var err error
		if tok, err = apigw.TokenFor(w.secret, who, time.Hour); err != nil {
			w.t.Fatal(err)
		}
	}
	return w.sendToken(status, method, path, tok, body, headers...)
}

func (w *wire) sendToken(status int, method, path, tok string, body any, headers ...string) exchange {
	w.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			w.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, w.url+path, bytes.NewReader(raw))
	if err != nil {
		w.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	x := exchange{status: resp.StatusCode, header: resp.Header, body: got}
	_ = json.Unmarshal(got, &x.json)
	name := method + " " + path
	if len(name) > 100 {
		name = name[:100] + "…"
	}
	if resp.StatusCode != status {
		w.t.Errorf("%s: got %d, want %d: %.300s", name, resp.StatusCode, status, got)
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	if err := w.validate(req, x); err != nil {
		w.t.Errorf("%s → %d: not as docs/openapi.yaml says: %v", name, resp.StatusCode, err)
	}
	return x
}

// validate checks an exchange against the document. A request that matches
// no operation must have the gateway's own 404; one that does gets its
// response validated (status documented, schema of the content type sent),
// and, when it succeeded, its request too.
func (w *wire) validate(req *http.Request, x exchange) error {
	ctx := context.Background()
	route, params, err := w.router.FindRoute(req)
	if err != nil {
		if x.status != http.StatusNotFound || !strings.HasPrefix(x.header.Get("Content-Type"), "application/json") {
			return err
		}
		var v any
		if err := json.Unmarshal(x.body, &v); err != nil {
			return err
		}
		schema := w.doc.Components.Schemas["GatewayNotFound"]
		if schema == nil || schema.Value == nil {
			return fmt.Errorf("no route, and no GatewayNotFound schema for the gateway's own 404: %w", err)
		}
		return schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
	}
	w.seen[route.Operation.OperationID] = true
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if x.status < 300 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return err
		}
	}
	return openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: x.status, Header: x.header,
		Body: io.NopCloser(bytes.NewReader(x.body)), Options: opts,
	})
}
