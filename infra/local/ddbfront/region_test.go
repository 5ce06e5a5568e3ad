package ddbfront_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// TestOneRegionEverywhere: DynamoDB Local names its region "ddblocal" in
// stream ARNs and records; AWS gives one region everywhere, the one the
// function ARNs and awsRegion say. Through the front, every ARN and record
// says us-east-1, and ARNs sent back (DescribeStream, shard iterators) work.
func TestOneRegionEverywhere(t *testing.T) {
	st := stacktest.Stack(t)
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "region"
	createTable(t, db, table, "")
	put(t, db, table, item("a", 1, nil))

	desc, err := db.DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, arn := range []string{aws.ToString(desc.Table.TableArn), aws.ToString(desc.Table.LatestStreamArn)} {
		if !strings.HasPrefix(arn, "arn:aws:dynamodb:us-east-1:") {
			t.Errorf("ARN %s: want region us-east-1", arn)
		}
	}
	streams, err := st.Streams().ListStreams(ctx(t), &dynamodbstreams.ListStreamsInput{TableName: aws.String(table)})
	if err != nil || len(streams.Streams) != 1 {
		t.Fatalf("list streams: %v, %v", streams, err)
	}
	if got := aws.ToString(streams.Streams[0].StreamArn); got != aws.ToString(desc.Table.LatestStreamArn) {
		t.Errorf("listed stream %s, want %s", got, aws.ToString(desc.Table.LatestStreamArn))
	}
	recs := records(t, st, table) // DescribeStream, GetShardIterator, GetRecords with the us-east-1 ARN
	if len(recs) != 1 {
		t.Fatalf("got %d records, want 1", len(recs))
	}
	if got := aws.ToString(recs[0].AwsRegion); got != "us-east-1" {
		t.Errorf("record's awsRegion: got %q, want us-east-1", got)
	}
}
