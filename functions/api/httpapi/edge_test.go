package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/tables"
)

func TestCursors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("una")
	e.mustUser("vic")
	p := e.mustProduct("Cup", "kitchen", 100, 100)
	e.mustProduct("Bowl", "kitchen", 100, 100)
	e.mustProduct("Jar", "kitchen", 100, 100)
	for range 3 {
		e.mustOrder("una", p, 1)
		e.mustOrder("vic", p, 1)
	}
	una, vic, admin := userCaller("una"), userCaller("vic"), adminCaller("root")

	page := e.do("GET", "/users/una/orders?limit=1", una, nil)
	want(t, page, 200)
	c := page.str("nextCursor")
	if c == "" {
		t.Fatal("no cursor on page 1")
	}
	want(t, e.do("GET", "/users/una/orders?limit=1&cursor="+c, una, nil), 200)

	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	payload, sig, _ := strings.Cut(c, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "una", "vic", -1))) + "." + sig
	cats := e.do("GET", "/products?category=kitchen&limit=1", anonymous, nil)
	placed := e.do("GET", "/orders?status=PLACED&limit=1", admin, nil)

	for name, tc := range map[string]struct {
		target string
		who    caller
	}{
		"modified payload":          {"/users/una/orders?cursor=" + flip(c, 3), una},
		"modified signature":        {"/users/una/orders?cursor=" + flip(c, len(c)-2), una},
		"forged position":           {"/users/una/orders?cursor=" + forged, una},
		"garbage":                   {"/users/una/orders?cursor=not-a-cursor", una},
		"another user's list":       {"/users/vic/orders?cursor=" + c, vic},
		"another filter":            {"/users/una/orders?status=PLACED&cursor=" + c, una},
		"another route":             {"/users/una/reviews?cursor=" + c, una},
		"category cursor elsewhere": {"/products?category=garden&cursor=" + cats.str("nextCursor"), anonymous},
		"merged cursor elsewhere":   {"/orders?status=SHIPPED&cursor=" + placed.str("nextCursor"), admin},
		"limit 0":                   {"/users/una/orders?limit=0", una},
		"limit 101":                 {"/users/una/orders?limit=101", una},
		"limit not a number":        {"/users/una/orders?limit=ten", una},
		"limit negative":            {"/products?category=kitchen&limit=-1", anonymous},
		"limit with a sign":         {"/users/una/orders?limit=%2B5", una},
		"limit with a leading zero": {"/users/una/orders?limit=05", una},
		"limit given twice":         {"/users/una/orders?limit=5&limit=6", una},
		"filter given twice":        {"/products?category=kitchen&category=garden", anonymous},
		"status given twice":        {"/users/una/orders?status=PLACED&status=SHIPPED", una},
		"cursor given twice":        {"/users/una/orders?cursor=" + c + "&cursor=" + c, una},
		"search text given twice":   {"/search?q=kettle&q=mug", anonymous},
	} {
		t.Run(name, func(t *testing.T) {
			want(t, e.do("GET", tc.target, tc.who, nil), 400, "validation")
		})
	}
	t.Run("limit 100 is fine, default 20", func(t *testing.T) {
		want(t, e.do("GET", "/users/una/orders?limit=100", una, nil), 200)
	})
}

func TestEdges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("wes")
	wes := userCaller("wes")

	t.Run("body over 64 KiB", func(t *testing.T) {
		big := `{"name":"` + strings.Repeat("x", 64<<10) + `","email":"w@example.com"}`
		want(t, e.do("PATCH", "/users/wes", wes, big), 413, "payload-too-large")
		ev := event("PATCH", "/users/wes", wes, nil)
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(big)), true
		want(t, e.send(ev), 413, "payload-too-large")
	})
	t.Run("exactly 64 KiB is read", func(t *testing.T) {
		body := `{"name":"` + strings.Repeat(" ", 64<<10-len(`{"name":"W"}`)) + `W"}`
		if len(body) != 64<<10 {
			t.Fatalf("body is %d bytes", len(body))
		}
		want(t, e.do("PATCH", "/users/wes", wes, body), 200)
	})
	t.Run("base64 body", func(t *testing.T) {
		ev := event("PATCH", "/users/wes", wes, nil)
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(`{"name":"Wes"}`)), true
		ev.Headers["content-type"] = "application/json; charset=utf-8"
		r := e.send(ev)
		want(t, r, 200)
		if r.str("name") != "Wes" {
			t.Errorf("got %s, want name Wes", r.Body)
		}
		ev.Body = "%%%"
		want(t, e.send(ev), 400, "validation")
	})
	t.Run("named stage prefix", func(t *testing.T) {
		ev := event("GET", "/prod/users/wes", wes, nil)
		ev.RequestContext.Stage = "prod"
		want(t, e.send(ev), 200)
	})
	t.Run("undeclared route", func(t *testing.T) {
		want(t, e.do("GET", "/nowhere", wes, nil), 404, "not-found")
		want(t, e.do("DELETE", "/users/wes", wes, nil), 404, "not-found")
	})
	t.Run("throttling that outlasts retries is 503 with Retry-After", func(t *testing.T) {
		remove := stacktest.Stack(t).Front.InjectFault(ddbfront.Fault{
			Table: tables.Physical(e.prefix, tables.Users), Operation: "GetItem", Code: "ProvisionedThroughputExceededException",
		})
		defer remove()
		r := e.do("GET", "/users/wes", wes, nil)
		want(t, r, 503, "unavailable")
		if r.Headers["retry-after"] == "" {
			t.Errorf("got headers %v, want Retry-After", r.Headers)
		}
	})
	t.Run("metrics in embedded metric format", func(t *testing.T) {
		e.mustOrder("wes", e.mustProduct("Hat", "clothes", 100, 1), 1)
		var sawError, sawPlaced bool
		for _, line := range strings.Split(strings.TrimSpace(e.metrics.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("metrics line is not JSON: %q", line)
			}
			aws, _ := rec["_aws"].(map[string]any)
			if aws == nil || aws["CloudWatchMetrics"] == nil || rec["route"] == nil || rec["latency"] == nil {
				t.Fatalf("got %q, want an EMF record with route and latency", line)
			}
			if rec["problemType"] == "payload-too-large" {
				sawError = true
			}
			if rec["ordersPlaced"] != nil {
				sawPlaced = true
			}
		}
		if !sawError {
			t.Error("no metrics record with problemType payload-too-large")
		}
		if !sawPlaced {
			t.Error("no metrics record with ordersPlaced")
		}
	})
}
