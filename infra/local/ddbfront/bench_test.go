package ddbfront_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// BenchmarkProxy compares PutItem, GetItem and Query through the front with the
// same calls straight to DynamoDB Local; the ratio is the front's overhead.
func BenchmarkProxy(b *testing.B) {
	st := stacktest.Stack(b)
	direct := dynamodb.NewFromConfig(endpoints.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(st.Upstream()) })
	table := stacktest.Prefix(b) + "bench"
	createTable(b, st.DynamoDB(), table, "")
	// The front with AWS's limits off: what the limits cost per call.
	unlimited := stacktest.Dedicated(b, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{Off: true}})
	clients := map[string]*dynamodb.Client{"front": st.DynamoDB(), "direct": direct, "front-limits-off": unlimited.DynamoDB()}
	for _, path := range []string{"direct", "front-limits-off", "front"} {
		db := clients[path]
		// Items on 100 partition keys: no key nears its 1,000 WCU/s.
		pk := func(i int) string { return "p" + strconv.Itoa(i%100) }
		ops := map[string]func(i int) error{
			"PutItem": func(i int) error {
				_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(pk(i), 0, map[string]types.AttributeValue{"v": num(int64(i))})})
				return err
			},
			"UpdateItem": func(i int) error {
				_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(pk(i), 0),
					UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}})
				return err
			},
			"TransactWriteItems": func(i int) error {
				_, err := db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
					TableName: aws.String(table), Key: key(pk(i), 0),
					UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
				}}}})
				return err
			},
			"GetItem": func(i int) error {
				_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(pk(i), 0)})
				return err
			},
			"Query": func(i int) error {
				_, err := db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :p"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: pk(i)}}, Limit: aws.Int32(10)})
				return err
			},
		}
		for _, op := range []string{"PutItem", "UpdateItem", "TransactWriteItems", "GetItem", "Query"} {
			b.Run(op+"/"+path, func(b *testing.B) {
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if err := ops[op](i); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
			})
		}
	}
}

// BenchmarkSweep measures the sweeper's throughput in expired items removed per second.
func BenchmarkSweep(b *testing.B) {
	st := stacktest.Dedicated(b, endpoints.Config{TTLSweepInterval: -1})
	db := st.DynamoDB()
	const perRound = 1000
	var removed int
	var spent time.Duration
	for round := 0; round < b.N; round++ {
		table := stacktest.OwnPrefix(b) + "sweep" + strconv.Itoa(round)
		createTable(b, db, table, "expiresAt")
		expired := num(time.Now().Add(-time.Hour).Unix())
		for i := 0; i < perRound; i += 25 {
			var reqs []types.WriteRequest
			for j := i; j < i+25; j++ {
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item("k", j, map[string]types.AttributeValue{"expiresAt": expired})}})
			}
			if _, err := db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}}); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		n, err := st.Front.Sweep(context.Background())
		spent += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		removed += n
	}
	b.ReportMetric(float64(removed)/spent.Seconds(), "items/s")
}
