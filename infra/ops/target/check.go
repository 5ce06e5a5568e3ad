package target

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/shared/tables"
)

// dialTimeout bounds each endpoint probe: the local stack answers at once
// or not at all.
const dialTimeout = 2 * time.Second

// Check makes sure the local stack is there to work on, in a second and with
// an error that says what to do, before a command meets the SDK's retries
// (2.5 s of them, then a raw dial error) or DynamoDB's unnamed
// "non-existent table": each endpoint must answer (else nothing runs `make
// run` on that port), and DynamoDB must hold the target's tables (else
// TABLE_PREFIX differs from `make run`'s; the prefixes it does have are
// named). A stage is not checked: its names come from its stack's outputs.
func (t *Target) Check(ctx context.Context) error {
	if !t.Local() {
		return nil
	}
	for _, ep := range []struct{ name, url, env string }{
		{"DynamoDB", t.DynamoDBURL, "DYNAMODB_PORT"},
		{"S3", t.S3URL, "S3_PORT"},
		{"search", t.SearchURL, "SEARCH_PORT"},
	} {
		u, err := url.Parse(ep.url)
		if err != nil {
			return fmt.Errorf("%s endpoint %q: %w", ep.name, ep.url, err)
		}
		d := net.Dialer{Timeout: dialTimeout}
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return fmt.Errorf("the local stack's %s endpoint %s is not answering (%v): start it with `make run`, or set %s to the port it listens on", ep.name, ep.url, err, ep.env)
		}
		c.Close()
	}
	db := dynamodb.NewFromConfig(t.AWS, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(t.DynamoDBURL)
		o.Retryer = aws.NopRetryer{}
	})
	have := map[string]bool{}
	p := dynamodb.NewListTablesPaginator(db, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list the tables at %s: %w", t.DynamoDBURL, err)
		}
		for _, n := range out.TableNames {
			have[n] = true
		}
	}
	var missing []string
	for _, tb := range tables.All() {
		if name := t.Tables[tb.Name]; !have[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	msg := fmt.Sprintf("the local stack at %s lacks the tables %s (TABLE_PREFIX=%q)", t.DynamoDBURL, strings.Join(missing, ", "), t.TablePrefix)
	if others := prefixes(have); len(others) > 0 {
		shown := others[:min(len(others), 3)]
		for i, p := range shown {
			shown[i] = fmt.Sprintf("TABLE_PREFIX=%q", p)
		}
		more := ""
		if len(others) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(others)-len(shown))
		}
		msg += fmt.Sprintf("; it has the tables of %s%s", strings.Join(shown, ", "), more)
	}
	return fmt.Errorf("%s: give the command the TABLE_PREFIX `make run` was started with (TABLE_PREFIX=<prefix> make <command>)", msg)
}

// prefixes returns, sorted, the table prefixes under which every table of
// shared/tables is among the names have.
func prefixes(have map[string]bool) []string {
	all := tables.All()
	var out []string
	for name := range have {
		prefix, ok := strings.CutSuffix(name, all[0].Name)
		if !ok {
			continue
		}
		complete := true
		for _, tb := range all[1:] {
			if !have[tables.Physical(prefix, tb.Name)] {
				complete = false
				break
			}
		}
		if complete {
			out = append(out, prefix)
		}
	}
	sort.Strings(out)
	return out
}
