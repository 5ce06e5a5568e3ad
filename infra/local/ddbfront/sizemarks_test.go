package ddbfront_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
)

// AWS charges a projected read the whole item it read. The front learns
// that item's size after the answer, and a write that shrank the item
// between the read and that moment made the charge smaller than AWS's: here
// 1 read unit for a read of a 10 KB item, which AWS charges 3. The write
// marks the sizes the item may have had around it, and the read is charged
// at least the largest since its admission.
func TestAProjectedReadIsChargedTheItemItRead(t *testing.T) {
	const slow = time.Second
	clock := newStillClock()
	st, table := frontOn(t, delayingProxy(t, "GetItem", "slowread", slow, true), ddbfront.Limits{
		PartitionWCU: 12, PartitionRCU: 12, Now: clock.Now, Partitions: onePerKey,
	}, "marks")
	db := st.DynamoDB()
	put(t, db, table, item("slowread", 1, map[string]types.AttributeValue{"body": tenKB}))
	clock.refill()
	read := sendLate("the projected read", func() error {
		_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("slowread", 1),
			ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk")}, noRetry)
		return err
	})
	time.Sleep(slow / 5)
	put(t, db, table, item("slowread", 1, nil)) // shrinks it, before the read's answer
	clock.refill()
	read.notYet(t, "the write")
	read.wait(t)
	// 12 units a second; the read of 10 KB takes 3, each consistent read
	// of an absent item 1.
	left := admitted(t, 20, func(i int) error {
		_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("slowread", 100+i),
			ConsistentRead: aws.Bool(true)}, noRetry)
		return err
	})
	if left != 9 {
		t.Errorf("after the projected read of the 10 KB item, %d units left, want 9: it was charged %d, want 3", left, 12-left)
	}
}
