package ddbfront

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// positions follows the end of each table's stream, so the sweeper knows,
// before it deletes, the highest sequence number already written: the REMOVE
// records its deletions cause come after it, and a user's earlier delete of
// the same key (whose record carries only minute-precision time) before it.
type positions struct {
	streams *dynamodbstreams.Client
	mu      sync.Mutex
	shards  map[string]*shardPos // streamArn + shard id
}

type shardPos struct {
	iterator *string
	last     string
	closed   bool
}

// end reads the stream up to its current end and returns the highest sequence
// number seen ("" for an empty stream).
func (p *positions) end(ctx context.Context, streamArn string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var shards []streamtypes.Shard
	var start *string
	for {
		out, err := p.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamArn), ExclusiveStartShardId: start})
		if err != nil {
			return "", fmt.Errorf("describe stream %s: %w", streamArn, err)
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		start = out.StreamDescription.LastEvaluatedShardId
	}
	max := ""
	for _, sh := range shards {
		id := streamArn + "\x00" + aws.ToString(sh.ShardId)
		pos := p.shards[id]
		if pos == nil {
			pos = &shardPos{}
			p.shards[id] = pos
		}
		if err := p.follow(ctx, streamArn, sh, pos); err != nil {
			return "", err
		}
		if seqLess(max, pos.last) {
			max = pos.last
		}
	}
	return max, nil
}

func (p *positions) follow(ctx context.Context, streamArn string, sh streamtypes.Shard, pos *shardPos) error {
	for !pos.closed {
		if pos.iterator == nil {
			in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(streamArn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon}
			if pos.last != "" {
				in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(pos.last)
			}
			out, err := p.streams.GetShardIterator(ctx, in)
			if err != nil {
				return fmt.Errorf("shard iterator %s: %w", aws.ToString(sh.ShardId), err)
			}
			pos.iterator = out.ShardIterator
		}
		out, err := p.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: pos.iterator, Limit: aws.Int32(1000)})
		var expired *streamtypes.ExpiredIteratorException
		var trimmed *streamtypes.TrimmedDataAccessException
		if errors.As(err, &expired) || errors.As(err, &trimmed) {
			pos.iterator = nil
			if errors.As(err, &trimmed) {
				pos.last = ""
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read stream %s: %w", streamArn, err)
		}
		for _, r := range out.Records {
			if s := aws.ToString(r.Dynamodb.SequenceNumber); seqLess(pos.last, s) {
				pos.last = s
			}
		}
		pos.iterator = out.NextShardIterator
		if out.NextShardIterator == nil {
			pos.closed = true
		}
		if len(out.Records) == 0 {
			return nil
		}
	}
	return nil
}

// seqLess compares decimal sequence numbers of any length; "" is the least.
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
