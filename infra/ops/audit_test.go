package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

	if code, out := d.command("audit", "-settle", "1s"); code != 0 || !strings.Contains(out, "2 archived") || !strings.Contains(out, "0 counters differ") {
		t.Fatalf("audit of exact counters: exit %d, want 0, 2 archived orders and no drift", code)
	}
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
	if code, out := d.command("reindex"); code != 0 || !strings.Contains(out, "2 documents written") {
		t.Errorf("reindex: exit %d, want 0 and 2 documents written", code)
	}
	if _, drift := d.state(s); drift != "" {
		t.Errorf("after the reindex: %s", drift)
	}
}
