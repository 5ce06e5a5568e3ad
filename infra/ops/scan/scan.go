// Package scan reads a whole DynamoDB table with a parallel Scan: the table is
// split into segments that are read concurrently, each page by page, as AWS's
// parallel scan works. The operator commands (audit, reindex) read the tables
// with it.
package scan

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Scanner is the part of the DynamoDB client a scan uses.
type Scanner interface {
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Input says what to read.
type Input struct {
	Table string
	// Segments is how many segments are read at once (default 4).
	Segments int
	// PageSize bounds the items of one page (0: DynamoDB's 1 MB page).
	PageSize int32
	// Consistent asks for strongly consistent reads.
	Consistent bool
	// Projection names the attributes to read; empty reads all of them.
	Projection []string
}

// Page receives each page, from several goroutines at once; an error stops
// the scan.
type Page func(items []map[string]types.AttributeValue) error

// Table reads every item of in.Table and hands it to page. It returns the
// first error of any segment, wrapped with the table and segment; the other
// segments stop then.
func Table(ctx context.Context, db Scanner, in Input, page Page) error {
	n := in.Segments
	if n <= 0 {
		n = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var proj *string
	var names map[string]string
	if len(in.Projection) > 0 {
		list := expression.NamesList(expression.Name(in.Projection[0]))
		for _, a := range in.Projection[1:] {
			list = list.AddNames(expression.Name(a))
		}
		e, err := expression.NewBuilder().WithProjection(list).Build()
		if err != nil {
			return fmt.Errorf("scan %s: projection: %w", in.Table, err)
		}
		proj, names = e.Projection(), e.Names()
	}
	var first error
	var once sync.Once
	fail := func(err error) {
		once.Do(func() { first = err })
		cancel()
	}
	var wg sync.WaitGroup
	for seg := range n {
		wg.Go(func() {
			var start map[string]types.AttributeValue
			for {
				req := &dynamodb.ScanInput{
					TableName: aws.String(in.Table), Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(int32(n)),
					ConsistentRead: aws.Bool(in.Consistent), ExclusiveStartKey: start, ProjectionExpression: proj,
				}
				req.ExpressionAttributeNames = names
				if in.PageSize > 0 {
					req.Limit = aws.Int32(in.PageSize)
				}
				out, err := db.Scan(ctx, req)
				if err != nil {
					fail(fmt.Errorf("scan %s segment %d/%d: %w", in.Table, seg, n, err))
					return
				}
				if len(out.Items) > 0 {
					if err := page(out.Items); err != nil {
						fail(fmt.Errorf("scan %s segment %d/%d: %w", in.Table, seg, n, err))
						return
					}
				}
				if len(out.LastEvaluatedKey) == 0 {
					return
				}
				start = out.LastEvaluatedKey
			}
		})
	}
	wg.Wait()
	return first
}
