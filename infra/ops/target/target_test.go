package target

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLocalTargetFollowsMakeRunsSettings(t *testing.T) {
	got, err := Resolve(context.Background(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Local() || got.DynamoDBURL != "http://127.0.0.1:8000" || got.S3URL != "http://127.0.0.1:9000" || got.SearchURL != "http://127.0.0.1:9200" ||
		got.FailureBucket != "shopstream-failures" || got.ArchiveBucket != "shopstream-archive" || got.Tables[tables.Orders] != "orders" {
		t.Errorf("defaults: got %+v", got)
	}
	if got.MappingIDs["orders-counters"] != failures.LocalMappingID("orders-counters") || got.Functions[wiring.Counters] != wiring.Counters {
		t.Errorf("mapping ids and functions: got %v, %v", got.MappingIDs, got.Functions)
	}
	got, err = Resolve(context.Background(), env(map[string]string{"DYNAMODB_PORT": "8100", "S3_PORT": "9100", "TABLE_PREFIX": "drill-",
		"FAILURE_BUCKET": "f", "ARCHIVE_BUCKET": "a"}))
	if err != nil {
		t.Fatal(err)
	}
	if got.DynamoDBURL != "http://127.0.0.1:8100" || got.S3URL != "http://127.0.0.1:9100" || got.FailureBucket != "f" || got.ArchiveBucket != "a" ||
		got.Tables[tables.CounterEvents] != "drill-counter-events" || got.Env()["ORDERS_TABLE"] != "drill-orders" {
		t.Errorf("overrides: got %+v", got)
	}
	if m, ok := got.Mapping(failures.LocalMappingID("carts-archiver")); !ok || m.Name != "carts-archiver" {
		t.Errorf("mapping by id: got %v, %v", m, ok)
	}
	if _, err := Resolve(context.Background(), env(map[string]string{"S3_PORT": "s3"})); err == nil {
		t.Error("a port that is no number: got nil error")
	}
}

// describer answers DescribeStacks with fixed outputs.
type describer map[string]string

func (d describer) DescribeStacks(_ context.Context, in *cloudformation.DescribeStacksInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	var outs []cftypes.Output
	for k, v := range d {
		outs = append(outs, cftypes.Output{OutputKey: aws.String(k), OutputValue: aws.String(v)})
	}
	return &cloudformation.DescribeStacksOutput{Stacks: []cftypes.Stack{{StackName: in.StackName, Outputs: outs}}}, nil
}

func TestStageTargetFromStackOutputs(t *testing.T) {
	outs := describer{OutputFailureBucket: "fb", OutputArchiveBucket: "ab", OutputSearchEndpoint: "search-x.eu-west-1.es.amazonaws.com", OutputUserPool: "eu-west-1_abc"}
	for _, tb := range tables.All() {
		outs[TableOutput(tb.Name)] = "shopstream-dev-" + tb.Name
	}
	for _, fn := range wiring.Functions() {
		outs[FunctionOutput(fn)] = "shopstream-dev-" + fn
	}
	for i, m := range wiring.Mappings() {
		outs[MappingOutput(m.Name)] = strings.Repeat(string(rune('a'+i)), 8) + "-0000-4000-8000-000000000000"
	}
	for _, k := range []string{"UserEmailsTableName", "StreamIndexerFunctionName", "OrdersCountersMappingId"} {
		if outs[k] == "" {
			t.Errorf("no output %s: the names differ from the CDK app's", k)
		}
	}
	got, err := stackOutputs(context.Background(), outs, "shopstream-dev")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := fromOutputs(aws.Config{}, "dev", got)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Local() || tg.FailureBucket != "fb" || tg.SearchURL != "https://search-x.eu-west-1.es.amazonaws.com" || !tg.SearchSigned ||
		tg.Functions[wiring.StreamIndexer] != "shopstream-dev-stream-indexer" || tg.Tables[tables.UserEmails] != "shopstream-dev-user-emails" ||
		tg.UserPoolID != "eu-west-1_abc" {
		t.Errorf("target: got %+v", tg)
	}
	if m, ok := tg.Mapping(outs["ReviewsCountersMappingId"]); !ok || m.Name != "reviews-counters" {
		t.Errorf("mapping by id: got %v, %v", m, ok)
	}
	delete(got, "CountersFunctionName")
	if _, err := fromOutputs(aws.Config{}, "dev", got); err == nil || !strings.Contains(err.Error(), "CountersFunctionName") {
		t.Errorf("missing output: got %v, want an error naming it", err)
	}
}

func TestPrefixesNamesCompleteSetsOnly(t *testing.T) {
	have := map[string]bool{"users": true, "a-users": true}
	for _, tb := range tables.All() {
		have[tables.Physical("shopstream-dev-", tb.Name)] = true
		have[tables.Physical("b-", tb.Name)] = true
	}
	got := prefixes(have)
	if want := []string{"b-", "shopstream-dev-"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
}
