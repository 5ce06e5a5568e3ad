package ddbfront_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// slowTransactions puts a proxy before DynamoDB Local that keeps every
// TransactWriteItems naming the value "slow" for the given time before it
// passes it on: a transaction that waits behind others for DynamoDB Local's
// one thread, as under load.
func slowTransactions(t *testing.T, slow time.Duration) string {
	return delayingProxy(t, "TransactWriteItems", "slow", slow, false)
}

// delayingProxy puts a proxy before DynamoDB Local that delays every request
// of operation op whose body names the value marker by slow: before passing
// it on, or, with afterAnswer, after DynamoDB Local answered it (a request
// done, whose answer is late).
func delayingProxy(t *testing.T, op, marker string, slow time.Duration, afterAnswer bool) string {
	t.Helper()
	return delayingProxyOf(t, delay{op: op, marker: marker, slow: slow, afterAnswer: afterAnswer})
}

// delay is one rule of delayingProxyOf: the requests of operation op whose
// body names the value marker wait slow, before DynamoDB Local has them or,
// with afterAnswer, after it answered them.
type delay struct {
	op, marker  string
	slow        time.Duration
	afterAnswer bool
}

// delayingProxyOf is delayingProxy with several rules; a request meets the
// first that matches it.
func delayingProxyOf(t *testing.T, rules ...delay) string {
	t.Helper()
	up, err := url.Parse(stacktest.Stack(t).Upstream())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		i := slices.IndexFunc(rules, func(d delay) bool {
			return strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+d.op) && bytes.Contains(body, []byte(`"`+d.marker+`"`))
		})
		if i < 0 {
			proxy.ServeHTTP(w, r)
			return
		}
		if !rules[i].afterAnswer {
			time.Sleep(rules[i].slow)
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		time.Sleep(rules[i].slow)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// frontOn starts a stack whose front passes on to upstream under limits,
// closed with the test, and creates a table of its own named after name.
func frontOn(t *testing.T, upstream string, limits ddbfront.Limits, name string) (*endpoints.Stack, string) {
	t.Helper()
	prefix := stacktest.OwnPrefix(t)
	st, err := endpoints.Start(context.Background(), endpoints.Config{
		DynamoDBUpstream: upstream, TTLSweepInterval: -1,
		SweepTables: func(table string) bool { return strings.HasPrefix(table, prefix) },
		Limits:      limits,
	})
	if err != nil {
		t.Fatalf("start stack: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	table := prefix + name
	createTable(t, st.DynamoDB(), table, "")
	return st, table
}

// A transaction holds its items for the window, as AWS's two phases do,
// however late DynamoDB Local answers it: a write of its item after the
// window but before its late answer is not refused (and is priced by every
// item it may find: possible_test.go). With HoldUntilAnswer
// it holds them until its answer, and that write is refused. Either way
// its ClientRequestToken stays in progress until the answer.
func TestTransactionHoldsItsItemsForTheWindow(t *testing.T) {
	const window, slow = 300 * time.Millisecond, 3 * time.Second
	upstream := slowTransactions(t, slow)
	for _, untilAnswer := range []bool{true, false} {
		st, table := frontOn(t, upstream, ddbfront.Limits{TxWindow: window, HoldUntilAnswer: untilAnswer}, "held")
		db := st.DynamoDB()
		// An item the front saw written, so that it follows its states
		// (TestTransactionOnAnItemNotFollowedHoldsItUntilItsAnswer has one
		// it does not).
		put(t, db, table, item("slow", 1, nil))

		in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("hold-" + table),
			TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(table), Item: item("slow", 1, nil)}}}}
		first := sendLate("the transaction", func() error {
			_, err := db.TransactWriteItems(ctx(t), in, noRetry)
			return err
		})
		// Once the transaction is in progress, its item is held either
		// way; at most the window later, only until the answer.
		deadline := time.Now().Add(slow / 3)
		for {
			_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("slow", 1),
				UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}, noRetry)
			var tce *types.TransactionConflictException
			if errors.As(err, &tce) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("hold until answer %v: a write of the item of a transaction in progress: got %v, want TransactionConflictException", untilAnswer, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(2 * window)
		_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("other", 1),
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}, noRetry)
		if err != nil {
			t.Fatalf("a write of another item: %v", err)
		}
		_, err = db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("slow", 1),
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(2)}}, noRetry)
		var tce *types.TransactionConflictException
		if got := errors.As(err, &tce); got != untilAnswer {
			t.Errorf("hold until answer %v: a write after the window, before the answer: got %v, want a conflict %v", untilAnswer, err, untilAnswer)
		}
		_, err = db.TransactWriteItems(ctx(t), in, noRetry)
		var tip *types.TransactionInProgressException
		if !errors.As(err, &tip) {
			t.Errorf("hold until answer %v: the same token before the answer: got %v, want TransactionInProgressException", untilAnswer, err)
		}
		first.notYet(t, "the checks ended")
		first.wait(t)
		s := st.Front.LimitStats()
		if held := s.LongestHold; untilAnswer != (held >= slow) || held < window {
			t.Errorf("hold until answer %v: longest hold %s; want at least %s, and %s or more only when held until the answer", untilAnswer, held, window, slow)
		}
	}
}

// A write whose client goes away before the answer still happens, as on
// AWS once the request arrived: the front waits for DynamoDB Local's
// answer, so a transaction keeps its items for its window, and its
// ClientRequestToken in progress until the answer. Before, the client's
// leaving cancelled the request to DynamoDB Local and ended the hold: a
// write of the item went through, and the token sent again was passed on as
// a replay of a transaction that had never been applied. The window here is
// longer than the client waits.
func TestATransactionWhoseClientLeftStillHoldsAndStaysInProgress(t *testing.T) {
	const slow, window = 4 * time.Second, 2 * time.Second
	upstream := slowTransactions(t, slow)
	st, table := frontOn(t, upstream, ddbfront.Limits{TxWindow: window}, "left")
	db := st.DynamoDB()

	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("left-" + table),
		TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(table), Item: item("slow", 1, map[string]types.AttributeValue{"v": num(7)})}}}}
	start := time.Now()
	gone, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	_, err := db.TransactWriteItems(gone, in, noRetry)
	cancel()
	if err == nil {
		t.Fatal("the transaction answered before its client gave up; the test proves nothing")
	}

	_, err = db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("slow", 1),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}, noRetry)
	var tce *types.TransactionConflictException
	if !errors.As(err, &tce) {
		t.Errorf("a write of the item after the client left, before the answer: got %v, want TransactionConflictException", err)
	}
	_, err = db.TransactWriteItems(ctx(t), in, noRetry)
	var tip *types.TransactionInProgressException
	if !errors.As(err, &tip) {
		t.Errorf("the same token after the client left, before the answer: got %v, want TransactionInProgressException", err)
	}
	if time.Since(start) >= window {
		t.Fatalf("the checks took %s, past the window; they prove nothing", time.Since(start))
	}

	// Once DynamoDB Local has answered, the transaction was applied, and
	// its token replays it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = db.TransactWriteItems(ctx(t), in, noRetry)
		if !errors.As(err, &tip) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the same token after the answer: %v", err)
	}
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("slow", 1), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := out.Item["v"].(*types.AttributeValueMemberN); !ok || v.Value != "7" {
		t.Errorf("the item after the answer: %v, want v = 7 (the transaction's, once)", out.Item)
	}
}

// late is a request whose answer a test expects late.
type late struct {
	what string
	done chan error
}

// sendLate sends a request in the background; what names it.
func sendLate(what string, send func() error) *late {
	l := &late{what: what, done: make(chan error, 1)}
	go func() { l.done <- send() }()
	return l
}

// notYet fails the test if the request has answered before what the test
// checked meanwhile (before): those checks prove nothing then.
func (l *late) notYet(t *testing.T, before string) {
	t.Helper()
	select {
	case err := <-l.done:
		t.Fatalf("%s answered (%v) before %s; the test proves nothing", l.what, err, before)
	default:
	}
}

// wait waits for the answer, which must be a success.
func (l *late) wait(t *testing.T) {
	t.Helper()
	if err := <-l.done; err != nil {
		t.Fatalf("%s: %v", l.what, err)
	}
}
