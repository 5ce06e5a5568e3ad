package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/shared/tables"
)

// command runs an operator command as make does and returns its exit status
// and output.
func (d *drill) command(args ...string) (int, string) {
	d.t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), args, env{stdout: &out, logger: testLogger(), getenv: d.getenv()})
	d.t.Logf("ops %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
	return code, out.String()
}

// TestAuditAndReindexCommands runs `make audit`, `make audit REPAIR=1` and
// `make reindex` against a running system, resolved as the commands resolve
// `make run`'s stack.
func TestAuditAndReindexCommands(t *testing.T) {
	d := startDrill(t, drillOptions{env: map[string]string{"ORDER_RETENTION": "1s", "CART_TTL": "1s"}})
	s := traffic(d)
	eventually(t, "the traffic counted, indexed and archived", func() string {
		_, drift := d.state(s)
		return drift
	})
	d.settle()

	// A stage's tables are capped (maximum throughput) and the audit reads
	// them at that cap: 9 throttled pages over its 4 segments (more than
	// the SDK's default 3 attempts each) are waited for, not a run that
	// ends with exit 2.
	d.faultTimes(tables.Orders, "Scan", "ThrottlingException", 9)
	d.faultTimes(tables.CounterEvents, "Scan", "ProvisionedThroughputExceededException", 9)
	if code, out := d.command("audit", "-settle", "1s"); code != 0 || !strings.Contains(out, "2 archived") || !strings.Contains(out, "0 counters differ") {
		t.Fatalf("audit of exact counters, its scans throttled: exit %d, want 0, 2 archived orders and no drift", code)
	}
	d.clearFaults()
	e, err := expression.NewBuilder().WithUpdate(expression.Add(expression.Name("orderCount"), expression.Value(2))).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.sys.DynamoDB().UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:        aws.String(tables.Physical(d.prefix, tables.Users)),
		Key:              map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: "u1"}},
		UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}); err != nil {
		t.Fatal(err)
	}
	code, out := d.command("audit", "-settle", "1s")
	if code != 1 || !strings.Contains(strings.Join(strings.Fields(out), " "), "user/u1 orderCount 5 3 drift") {
		t.Errorf("audit of a drifted counter: exit %d, want 1 and the line: user/u1 orderCount 5 3 drift", code)
	}
	if code, out := d.command("audit", "-repair", "-settle", "1s"); code != 0 || !strings.Contains(out, "1 repaired") {
		t.Errorf("audit -repair: exit %d, want 0 and 1 repaired", code)
	}
	if _, drift := d.state(s); drift != "" {
		t.Errorf("after the repair: %s", drift)
	}

	if got, _ := d.http("DELETE", d.sys.SearchURL+"/products", "", nil); got != http.StatusOK {
		t.Fatalf("drop index: %d", got)
	}
	d.faultTimes(tables.Products, "Scan", "ThrottlingException", 9)
	if code, out := d.command("reindex"); code != 0 || !strings.Contains(out, "2 documents written") {
		t.Errorf("reindex: exit %d, want 0 and 2 documents written", code)
	}
	if _, drift := d.state(s); drift != "" {
		t.Errorf("after the reindex: %s", drift)
	}
}

// TestRepairBeforeReplayCountsOnce: an incident throttles the counters until
// their mappings give the batches up (orders placed, a review written and
// another deleted, all in the failure bucket). After it, an order counts as
// usual; the on-call engineer repairs the counters with the audit first and
// replays the failure bucket after: the replayed records are in the repaired
// counters already and count once, and an order placed after the repair
// counts too.
func TestRepairBeforeReplayCountsOnce(t *testing.T) {
	d := startDrill(t, drillOptions{})
	for _, u := range []string{"u1", "u2"} {
		d.api(201, "POST", "/users", u, map[string]any{"name": strings.ToUpper(u)}, nil)
	}
	var p product
	d.api(201, "POST", "/products", "admin", map[string]any{"name": "Kettle", "description": "Boils", "category": "kitchen", "priceCents": 1000, "stock": 100}, &p)
	place := func(u string, qty int) {
		d.api(201, "POST", "/users/"+u+"/orders", u, map[string]any{"items": []map[string]any{{"productId": p.ProductID, "quantity": qty}}}, nil)
	}
	review := func(u string, rating int) {
		d.api(201, "PUT", "/products/"+p.ProductID+"/reviews/"+u, u, map[string]any{"rating": rating, "title": "t", "body": "b"}, nil)
	}
	review("u2", 2)
	place("u1", 1)
	want := func(u1, u2 user, units, reviews, ratings int64) string {
		// The product page is read eventually consistent, and an API
		// instance repeats a page it read for a moment.
		time.Sleep(ddbfront.DefaultStaleReads + store.DefaultPageRepeat + 30*time.Millisecond)
		var wrong strings.Builder
		for u, w := range map[string]user{"u1": u1, "u2": u2} {
			var got user
			d.api(200, "GET", "/users/"+u, u, nil, &got)
			if got != w {
				fmt.Fprintf(&wrong, "user %s: got %+v, want %+v; ", u, got, w)
			}
		}
		var got product
		d.api(200, "GET", "/products/"+p.ProductID, "", nil, &got)
		if got.UnitsSold != units || got.ReviewCount != reviews || (reviews > 0 && (got.RatingAverage == nil || *got.RatingAverage != float64(ratings)/float64(reviews))) {
			fmt.Fprintf(&wrong, "product: got units %d, reviews %d, rating %v; want %d, %d, %d/%d", got.UnitsSold, got.ReviewCount, got.RatingAverage, units, reviews, ratings, reviews)
		}
		return wrong.String()
	}
	eventually(t, "the counters before the incident", func() string {
		return want(user{1, 1000, 0}, user{0, 0, 1}, 1, 1, 2)
	})

	d.fault(tables.CounterEvents, "TransactWriteItems", "ThrottlingException")
	place("u1", 2)
	place("u2", 3)
	review("u1", 5)
	d.api(204, "DELETE", "/products/"+p.ProductID+"/reviews/u2", "u2", nil, nil)
	eventually(t, "the counters gave the incident's batches up", func() string {
		got := d.failed()
		if len(got["orders-counters"]) == 0 || len(got["reviews-counters"]) == 0 {
			return fmt.Sprintf("failure objects: %d of orders-counters, %d of reviews-counters", len(got["orders-counters"]), len(got["reviews-counters"]))
		}
		return ""
	})
	d.settle()
	d.clearFaults()
	place("u2", 1)
	d.settle()

	eventually(t, "the order after the incident counted, the incident's records missing", func() string {
		return want(user{1, 1000, 0}, user{1, 1000, 1}, 2, 1, 2)
	})

	// The incident's facts wait in the failure bucket: on their way, not
	// drift; the repair leaves them to the replay, and exits 1 until it
	// has run (the counters do not agree with the tables yet).
	if code, out := d.command("audit", "-repair", "-settle", "3s"); code != 1 || !strings.Contains(out, "facts wait in the failure bucket") || !strings.Contains(out, " 0 repaired") {
		t.Fatalf("audit -repair: exit %d, want 1, the facts on their way named and nothing repaired", code)
	}
	if drift := want(user{1, 1000, 0}, user{1, 1000, 1}, 2, 1, 2); drift != "" {
		t.Fatalf("after the repair: %s", drift)
	}
	// u1: 1 + 2 units, and 1 more after the repair; u2: 3 + 1.
	exact := func(after int64) string {
		return want(user{2 + after, 3000 + 1000*after, 1}, user{2, 4000, 0}, 7+after, 1, 5)
	}
	place("u1", 1)
	after := int64(1)
	if code, _ := d.replay(); code != 0 {
		t.Fatalf("replay: exit %d, want 0", code)
	}
	d.settle()
	eventually(t, "the replay and the order after the repair counted", func() string { return exact(after) })
	// A repair after the replay, and a replay again, change nothing.
	if code, out := d.command("audit", "-repair", "-settle", "1s"); code != 0 || !strings.Contains(out, " 0 repaired") {
		t.Errorf("audit -repair after the replay: exit %d, want 0 and nothing repaired", code)
	}
	if drift := exact(after); drift != "" {
		t.Errorf("after the replay and a second repair: %s", drift)
	}
	if code, out := d.command("audit", "-settle", "1s"); code != 0 || !strings.Contains(out, "0 counters differ") {
		t.Errorf("audit after the replay: exit %d, want 0 and no drift", code)
	}
}
