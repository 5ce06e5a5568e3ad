package system_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/invoke"
	"github.com/shopstream/shopstream/infra/local/samples"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestMakeSamplesPutsAndTakesAway: `make samples` puts in place, in the tables
// events/sam-env.json names on `TABLE_PREFIX=shopstream-dev- make run`, every
// item the samples expect (twice is the same), and `make samples-clean` takes
// them all away. Against tables that are not there, it and `make invoke` fail
// before anything runs and say which tables are missing and how to get them.
func TestMakeSamplesPutsAndTakesAway(t *testing.T) {
	ctx := context.Background()
	sys, err := system.Start(ctx, system.Config{
		Stack:       endpoints.Config{DynamoDBUpstream: stacktest.Stack(t).Upstream(), TTLSweepInterval: -1},
		TablePrefix: samples.TablePrefix,
		NoMappings:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	db := sys.DynamoDB()
	envVars := localEnvVars(t, filepath.Join(samples.Dir(t), "sam-env.json"), map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": sys.DynamoDBURL, "AWS_ENDPOINT_URL_S3": sys.S3URL, "SEARCH_URL": sys.SearchURL,
	})
	noShell := func(string) (string, bool) { return "", false }
	tableOf := map[string]string{"USERS_TABLE": tables.Users, "PRODUCTS_TABLE": tables.Products, "PRODUCT_STOCK_TABLE": tables.ProductStock}
	present := func() int {
		n := 0
		for _, s := range invoke.SampleItems() {
			key, err := attributevalue.MarshalMap(s.Key)
			if err != nil {
				t.Fatal(err)
			}
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tables.Physical(samples.TablePrefix, tableOf[s.Table])), Key: key, ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			if out.Item != nil {
				n++
			}
		}
		return n
	}
	all := len(invoke.SampleItems())

	for i := 0; i < 2; i++ {
		var out, errs bytes.Buffer
		if err := invoke.SamplesCommand(ctx, []string{"-env-vars", envVars}, noShell, &out, &errs); err != nil {
			t.Fatalf("make samples: %v\n%s", err, errs.String())
		}
		if got := present(); got != all {
			t.Errorf("after make samples (run %d): got %d sample items, want %d\n%s", i+1, got, all, out.String())
		}
	}
	var out, errs bytes.Buffer
	if err := invoke.SamplesCommand(ctx, []string{"-clean", "-env-vars", envVars}, noShell, &out, &errs); err != nil {
		t.Fatalf("make samples-clean: %v\n%s", err, errs.String())
	}
	if got := present(); got != 0 {
		t.Errorf("after make samples-clean: got %d sample items, want 0", got)
	}
	if !strings.Contains(out.String(), "5 of 5") {
		t.Errorf("make samples-clean: got %q, want it to count 5 of 5 deleted", out.String())
	}

	// The tables of another prefix: make run without TABLE_PREFIX.
	unprefixed := func(string) (string, bool) { return "", false }
	other := localEnvVars(t, filepath.Join(samples.Dir(t), "sam-env.json"), map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": sys.DynamoDBURL, "AWS_ENDPOINT_URL_S3": sys.S3URL, "SEARCH_URL": sys.SearchURL,
		"USERS_TABLE": "users-of-nobody", "PRODUCTS_TABLE": "products-of-nobody",
	})
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"make samples", func() error {
			return invoke.SamplesCommand(ctx, []string{"-env-vars", other}, unprefixed, &out, &errs)
		}},
		{"make invoke", func() error {
			return invoke.Command(ctx, []string{"-t", filepath.Join("..", "..", "..", "template.yaml"), "-e", filepath.Join(samples.Dir(t), "counters-order-placed.json"),
				"-env-vars", other, "CountersFunction"}, unprefixed, &out, &errs)
		}},
	} {
		err := tc.run()
		if !errors.Is(err, invoke.ErrMissingTables) {
			t.Errorf("%s on missing tables: got %v, want %v", tc.name, err, invoke.ErrMissingTables)
			continue
		}
		for _, want := range []string{"products-of-nobody", "users-of-nobody", "TABLE_PREFIX=shopstream-dev-"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s on missing tables: got %q, want it to name %s", tc.name, err, want)
			}
		}
	}
}
