package ddbfront_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go/logging"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// wire records every response as the client received it: the operation, the
// status, the X-Amz-Crc32 header and the body bytes.
type wire struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []response
}

type response struct {
	op     string
	status int
	crc    string
	body   []byte
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	target := req.Header.Get("X-Amz-Target")
	w.mu.Lock()
	w.seen = append(w.seen, response{
		op:     target[strings.LastIndexByte(target, '.')+1:],
		status: resp.StatusCode,
		crc:    resp.Header.Get("X-Amz-Crc32"),
		body:   body,
	})
	w.mu.Unlock()
	return resp, nil
}

// sdkLog keeps what the SDK logs; it warns when a body fails its checksum.
type sdkLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *sdkLog) Logf(c logging.Classification, format string, v ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, string(c)+": "+fmt.Sprintf(format, v...))
	l.mu.Unlock()
}

// TestEveryResponseCarriesTheChecksumOfItsBody runs the calls the counters
// and the API make, and the faults drills inject, against a front with a
// commit barrier (as a stack with DATA_DIR has it), and checks that each
// response's X-Amz-Crc32 is the CRC32 of the bytes the client received: the
// SDK checks it on every DynamoDB response, and a missing header counts as 0.
func TestEveryResponseCarriesTheChecksumOfItsBody(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, DataDir: t.TempDir()})
	w := &wire{next: http.DefaultTransport}
	log := &sdkLog{}
	client := &http.Client{Transport: w}
	db := dynamodb.NewFromConfig(endpoints.AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(st.DynamoDBURL)
		o.HTTPClient = client
		o.Logger = log
		o.RetryMaxAttempts = 1
	})
	streams := dynamodbstreams.NewFromConfig(endpoints.AWSConfig(), func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(st.DynamoDBURL)
		o.HTTPClient = client
		o.Logger = log
	})
	table := stacktest.Prefix(t) + "crc"
	createTable(t, st.DynamoDB(), table, "")
	// Text beyond ASCII: a checksum over characters rather than bytes would differ.
	text := &types.AttributeValueMemberS{Value: "Grüße, 東京 🛒"}

	calls := []struct {
		name    string
		call    func() error
		wantErr bool
	}{
		{"DescribeTable", func() error {
			_, err := db.DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
			return err
		}, false},
		{"UpdateTimeToLive", func() error {
			_, err := db.UpdateTimeToLive(ctx(t), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}})
			return err
		}, false},
		{"UpdateTimeToLive refused", func() error {
			_, err := db.UpdateTimeToLive(ctx(t), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}})
			return err
		}, true},
		{"DescribeTimeToLive", func() error {
			_, err := db.DescribeTimeToLive(ctx(t), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
			return err
		}, false},
		{"PutItem", func() error {
			_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table),
				Item: item("a", 1, map[string]types.AttributeValue{"v": num(1), "text": text})})
			return err
		}, false},
		{"TransactWriteItems", func() error {
			_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: item("b", 1, map[string]types.AttributeValue{"text": text}),
					ConditionExpression: aws.String("attribute_not_exists(pk)")}},
				{Update: &types.Update{TableName: aws.String(table), Key: key("a", 1), UpdateExpression: aws.String("ADD v :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}}},
			}})
			return err
		}, false},
		{"TransactWriteItems cancelled with reasons", func() error {
			_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: item("b", 1, map[string]types.AttributeValue{"text": text}),
					ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
					ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
				{Update: &types.Update{TableName: aws.String(table), Key: key("a", 1), UpdateExpression: aws.String("ADD v :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}}},
			}})
			var tce *types.TransactionCanceledException
			if err != nil && !errors.As(err, &tce) {
				return fmt.Errorf("got %v, want TransactionCanceledException", err)
			}
			return err
		}, true},
		{"UpdateItem conditional failure", func() error {
			_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("a", 1),
				UpdateExpression:                    aws.String("SET v = :v"),
				ConditionExpression:                 aws.String("v = :old"),
				ExpressionAttributeValues:           map[string]types.AttributeValue{":v": num(9), ":old": num(0)},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
			var ccf *types.ConditionalCheckFailedException
			if err != nil && !errors.As(err, &ccf) {
				return fmt.Errorf("got %v, want ConditionalCheckFailedException", err)
			}
			return err
		}, true},
		{"UpdateItem", func() error {
			_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("a", 1),
				UpdateExpression: aws.String("ADD v :one"), ReturnValues: types.ReturnValueAllNew,
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}})
			return err
		}, false},
		{"GetItem", func() error {
			_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a", 1), ConsistentRead: aws.Bool(true)})
			return err
		}, false},
		{"BatchGetItem", func() error {
			_, err := db.BatchGetItem(ctx(t), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				table: {Keys: []map[string]types.AttributeValue{key("a", 1), key("b", 1), key("z", 1)}},
			}})
			return err
		}, false},
		{"Query", func() error {
			_, err := db.Query(ctx(t), &dynamodb.QueryInput{TableName: aws.String(table),
				KeyConditionExpression:    aws.String("pk = :pk"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "a"}}})
			return err
		}, false},
		{"Scan", func() error {
			_, err := db.Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(table)})
			return err
		}, false},
		{"GetItem of a missing table", func() error {
			_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table + "-missing"), Key: key("a", 1)})
			return err
		}, true},
		{"fault", func() error {
			st.Front.InjectFault(ddbfront.Fault{Table: table, Operation: "UpdateItem", Code: "ProvisionedThroughputExceededException", Times: 1})
			_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("a", 1),
				UpdateExpression: aws.String("ADD v :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}})
			return err
		}, true},
		{"fault: transaction conflict", func() error {
			st.Front.InjectFault(ddbfront.Fault{Table: table, Code: "TransactionConflict", Times: 1})
			_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{TableName: aws.String(table), Key: key("a", 1), UpdateExpression: aws.String("ADD v :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}}},
			}})
			return err
		}, true},
		{"GetRecords", func() error {
			desc, err := db.DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
			if err != nil {
				return err
			}
			sd, err := streams.DescribeStream(ctx(t), &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
			if err != nil {
				return err
			}
			for _, sh := range sd.StreamDescription.Shards {
				it, err := streams.GetShardIterator(ctx(t), &dynamodbstreams.GetShardIteratorInput{StreamArn: desc.Table.LatestStreamArn,
					ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
				if err != nil {
					return err
				}
				if _, err := streams.GetRecords(ctx(t), &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); err != nil {
					return err
				}
			}
			return nil
		}, false},
	}
	for _, c := range calls {
		w.mu.Lock()
		from := len(w.seen)
		w.mu.Unlock()
		err := c.call()
		if (err != nil) != c.wantErr {
			t.Errorf("%s: got error %v, want error %v", c.name, err, c.wantErr)
		}
		w.mu.Lock()
		seen := append([]response(nil), w.seen[from:]...)
		w.mu.Unlock()
		if len(seen) == 0 {
			t.Errorf("%s: no response recorded", c.name)
		}
		for _, r := range seen {
			if got, want := r.crc, strconv.FormatUint(uint64(crc32.ChecksumIEEE(r.body)), 10); got != want {
				t.Errorf("%s: %s answered %d with X-Amz-Crc32 %q, want %q (CRC32 of its %d-byte body %.200q)",
					c.name, r.op, r.status, got, want, len(r.body), r.body)
			}
		}
	}
	for _, line := range log.lines {
		if strings.Contains(line, "checksum") {
			t.Errorf("SDK log: %s", line)
		}
	}
}
