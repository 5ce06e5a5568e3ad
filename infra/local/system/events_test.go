package system_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/local/stack"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/shared/wiring"
)

// TestSampleEvents runs every stream sample in events/ through its function,
// in the order a stream would deliver them, against tables named as in
// `make run` (no prefix), and checks what each leaves behind.
func TestSampleEvents(t *testing.T) {
	sys, err := system.Start(context.Background(), system.Config{
		Stack:      stack.Config{DynamoDBUpstream: stacktest.Stack(t).Upstream(), TTLSweepInterval: -1},
		NoMappings: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	db := sys.DynamoDB()
	ctx := context.Background()
	for table, item := range map[string]map[string]types.AttributeValue{
		"users":    {"userId": &types.AttributeValueMemberS{Value: "sample-user"}, "version": &types.AttributeValueMemberN{Value: "1"}},
		"products": {"productId": &types.AttributeValueMemberS{Value: "sample-product"}, "version": &types.AttributeValueMemberN{Value: "1"}},
	} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	counter := func(table, key, id, attr string) int64 {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{key: &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			t.Fatal(err)
		}
		n, ok := out.Item[attr].(*types.AttributeValueMemberN)
		if !ok {
			return 0
		}
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v
	}
	steps := []struct {
		file, fn string
		check    func() string
	}{
		{"counters-order-placed.json", wiring.Counters, func() string {
			return expect(counter("users", "userId", "sample-user", "lifetimeSpendCents"), 9800) + expect(counter("products", "productId", "sample-product", "unitsSold"), 2)
		}},
		{"counters-review-created.json", wiring.Counters, func() string {
			return expect(counter("products", "productId", "sample-product", "ratingTotal"), 5) + expect(counter("users", "userId", "sample-user", "reviewCount"), 1)
		}},
		{"counters-order-cancelled.json", wiring.Counters, func() string {
			return expect(counter("users", "userId", "sample-user", "lifetimeSpendCents"), 0) + expect(counter("products", "productId", "sample-product", "unitsSold"), 0)
		}},
		{"counters-order-archived.json", wiring.Counters, func() string {
			return expect(counter("users", "userId", "sample-user", "orderCount"), 1)
		}},
		{"indexer-product-changed.json", wiring.StreamIndexer, func() string {
			resp, err := http.Get(sys.SearchURL + "/products/_doc/sample-product")
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			var doc struct {
				Version int `json:"_version"`
				Source  struct {
					Name string `json:"name"`
				} `json:"_source"`
			}
			json.NewDecoder(resp.Body).Decode(&doc)
			if doc.Version != 2 || doc.Source.Name != "Copper Kettle" {
				return "indexed document: got " + doc.Source.Name + " v" + strconv.Itoa(doc.Version)
			}
			return ""
		}},
		{"indexer-product-deleted.json", wiring.StreamIndexer, func() string {
			resp, err := http.Get(sys.SearchURL + "/products/_doc/sample-product")
			if err != nil {
				return err.Error()
			}
			resp.Body.Close()
			return expect(int64(resp.StatusCode), 404)
		}},
		{"archiver-ttl-removals.json", wiring.Archiver, func() string {
			msg := ""
			for _, prefix := range []string{"orders/year=2026/month=11/day=22/", "carts/year=2026/month=11/day=22/"} {
				list, err := sys.S3().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(system.DefaultArchiveBucket), Prefix: aws.String(prefix)})
				if err != nil {
					return err.Error()
				}
				msg += expect(int64(len(list.Contents)), 1)
			}
			return msg
		}},
	}
	for _, st := range steps {
		t.Run(st.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "..", "..", "events", st.file))
			if err != nil {
				t.Fatal(err)
			}
			var ev events.DynamoDBEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatalf("decode: %v", err)
			}
			resp, err := sys.Functions[st.fn].Handle(ctx, ev)
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("handle: got %v, %v; want no failure", resp.BatchItemFailures, err)
			}
			if msg := st.check(); msg != "" {
				t.Errorf("after %s: %s", st.file, msg)
			}
		})
	}
}

func expect(got, want int64) string {
	if got != want {
		return "got " + strconv.FormatInt(got, 10) + ", want " + strconv.FormatInt(want, 10) + "; "
	}
	return ""
}
