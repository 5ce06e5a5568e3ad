// Package ddbfront is the stack's DynamoDB endpoint: it passes every DynamoDB
// and DynamoDB Streams request through to DynamoDB Local unchanged and adds what
// DynamoDB Local lacks: TTL expiry (a sweeper), the service userIdentity on the
// REMOVE stream records the sweeper caused, stream records' creation times to
// the second, injectable AWS-shaped faults for reliability tests, and a
// transaction acknowledged only once it is committed.
package ddbfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// Config configures a Front.
type Config struct {
	// Upstream is DynamoDB Local's URL.
	Upstream string
	// DynamoDB and Streams are clients pointed at Upstream, used by the
	// sweeper, the stream follower and the limits; nil: New makes them, with
	// the local stack's dummy credentials.
	DynamoDB *dynamodb.Client
	Streams  *dynamodbstreams.Client
	// SweepInterval is the TTL sweeper's period; 0 disables the background loop
	// (Sweep can still be called).
	SweepInterval time.Duration
	// DataDir keeps the sweeper's ledger and the stream records' creation
	// seconds, so annotations survive a restart; "" keeps them in memory.
	DataDir string
	Logger  *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// SweepTables, when set, limits the sweeper to the tables it accepts.
	SweepTables func(table string) bool
	// AfterScan, when set, runs after the sweeper has found a page of expired
	// items and before it deletes them: tests use it to change an item in between.
	AfterScan func(table string)
	// CommitBarrier holds the answer to a transaction until DynamoDB Local
	// has committed it (see commit.go). Set it when DynamoDB Local keeps its
	// data on disk; in memory there is nothing a commit would save.
	CommitBarrier bool
	// Limits are AWS's transaction conflicts and partition throughput,
	// enforced unless Limits.Off.
	Limits Limits
	// UpstreamConcurrency bounds the item and stream record requests in
	// flight at DynamoDB Local; a transaction holding its items goes first
	// (default DefaultUpstreamConcurrency; negative: unbounded).
	UpstreamConcurrency int
}

// Front is the DynamoDB endpoint.
type Front struct {
	cfg       Config
	client    *http.Client
	ledger    *ledger
	ttl       *ttlSettings
	faults    *faults
	positions *positions
	barrier   *barrier
	limits    *limiter
	calls     *callCounts

	stop chan struct{}
	wg   sync.WaitGroup
}

// maxBody bounds a request body; DynamoDB's own limit is 16 MB for BatchWriteItem.
const maxBody = 32 << 20

// New opens the front and, if SweepInterval > 0, starts the sweeper.
func New(ctx context.Context, cfg Config) (*Front, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	upstream := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	if cfg.DynamoDB == nil {
		cfg.DynamoDB = dynamodb.NewFromConfig(upstream, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(cfg.Upstream) })
	}
	if cfg.Streams == nil {
		cfg.Streams = dynamodbstreams.NewFromConfig(upstream, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(cfg.Upstream) })
	}
	calls := newCallCounts()
	cfg.DynamoDB = dynamodb.New(cfg.DynamoDB.Options(), func(o *dynamodb.Options) {
		o.HTTPClient = countedClient{n: calls, c: o.HTTPClient}
	})
	cfg.Streams = dynamodbstreams.New(cfg.Streams.Options(), func(o *dynamodbstreams.Options) {
		o.HTTPClient = countedClient{n: calls, c: o.HTTPClient}
	})
	l, err := openLedger(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	ttl, err := openTTLSettings(cfg.DataDir)
	if err != nil {
		l.close()
		return nil, err
	}
	stamps, seen, err := openStampLog(cfg.DataDir, time.Now())
	if err != nil {
		l.close()
		return nil, err
	}
	transport := gatedTransport{g: newGate(cfg.UpstreamConcurrency), rt: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true,
	}}
	if transport.g != nil {
		// The front's own reads (pricing a write, the sweeper's) take
		// their turn at the gate too.
		cfg.DynamoDB = dynamodb.New(cfg.DynamoDB.Options(), func(o *dynamodb.Options) {
			o.HTTPClient = gatedClient{g: transport.g, c: o.HTTPClient}
		})
	}
	f := &Front{
		cfg:       cfg,
		client:    &http.Client{Transport: transport},
		ledger:    l,
		ttl:       ttl,
		faults:    &faults{},
		positions: newPositions(cfg.Streams, cfg.DynamoDB, cfg.Logger, stamps, seen),
		stop:      make(chan struct{}),
		limits:    newLimiter(cfg.Limits, cfg.DynamoDB),
		calls:     calls,
	}
	if cfg.CommitBarrier {
		f.barrier = &barrier{run: f.listTablesBarrier}
	}
	if err := f.settlePending(ctx); err != nil {
		f.positions.close()
		l.close()
		return nil, err
	}
	if cfg.SweepInterval > 0 {
		f.wg.Add(1)
		go f.sweepLoop()
	}
	return f, nil
}

// Close stops the sweeper and the stream follower and closes the ledger.
func (f *Front) Close() error {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wg.Wait()
	f.client.CloseIdleConnections()
	return errors.Join(f.positions.close(), f.ledger.close())
}

func (f *Front) sweepLoop() {
	defer f.wg.Done()
	t := time.NewTicker(f.cfg.SweepInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-f.stop; cancel() }()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			start := time.Now()
			n, err := f.Sweep(ctx)
			if err != nil && ctx.Err() == nil {
				f.cfg.Logger.Warn("ttl sweep", "err", err.Error(), "count", n)
				continue
			}
			if n > 0 {
				f.cfg.Logger.Info("ttl sweep", "count", n, "ms", time.Since(start).Milliseconds())
			}
		}
	}
}

// ServeHTTP passes a request through to DynamoDB Local, after the fault hook
// and with the GetRecords response annotated.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "com.amazon.coral.service#SerializationException", "read body: "+err.Error())
		return
	}
	if len(body) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "com.amazon.coral.service#SerializationException", "request too large")
		return
	}
	body = toLocal(body)
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	tables := tablesOf(op, body)
	if fault, ok := f.faults.match(op, tables); ok {
		if fault.Code == conflict && singleWrites[op] {
			writeErrorBody(w, conflictRefusal.status, conflictRefusal.body)
			return
		}
		if fault.Code == conflict {
			// A transaction's tables are its actions', in order.
			writeErrorBody(w, http.StatusBadRequest, fault.cancellation(tables))
			return
		}
		writeError(w, fault.status(), fault.typeName(), fault.message())
		return
	}
	adm, refused := f.limits.admit(r.Context(), op, body)
	if refused != nil {
		writeErrorBody(w, refused.status, refused.body)
		return
	}
	defer adm.release()
	if adm.refusedAll() {
		// Every statement of the batch was refused: DynamoDB Local has
		// nothing to run.
		f.answer(w, func() (any, error) { return json.RawMessage(adm.rewrite.answer(nil)), nil })
		return
	}
	switch target {
	case "DynamoDB_20120810.UpdateTimeToLive":
		f.answer(w, func() (any, error) { return f.updateTimeToLive(r.Context(), body) })
		return
	case "DynamoDB_20120810.DescribeTimeToLive":
		f.answer(w, func() (any, error) { return f.describeTimeToLive(r.Context(), body) })
		return
	}
	var decided bool // DynamoDB Local's answer decided the write
	if writeTargets[target] && f.limits != nil && (adm == nil || adm.untracked) {
		// A write the limits could not name: no image may outlive it,
		// nor come from a write it overlapped (imagecache.go). An answer
		// that does not decide it leaves it on its way a while longer.
		f.limits.beginUntracked()
		defer func() {
			if decided {
				f.limits.endUntracked()
				return
			}
			time.AfterFunc(undecidedFor, f.limits.endUntracked)
		}()
	}
	var streams []string
	if writeTargets[target] {
		streams = f.positions.before(r.Context(), writtenTables(op, body))
	}
	if adm != nil && adm.rewrite != nil {
		body = adm.rewrite.forward
	}
	// A write, once sent, is carried to its answer even when its client
	// goes away, as AWS completes a request it received: so the front
	// learns its outcome, and a transaction keeps its items and its token
	// in progress until then. Only a DynamoDB Local that does not answer
	// within undecidedFor leaves it undecided.
	wctx := r.Context()
	if writeTargets[target] {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(wctx), undecidedFor)
		defer cancel()
	}
	fctx := wctx
	if adm.holds() {
		fctx = urgent(fctx)
	}
	req, err := http.NewRequestWithContext(fctx, r.Method, f.cfg.Upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", err.Error())
		return
	}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Accept-Encoding") {
			continue
		}
		req.Header[k] = vs
	}
	f.calls.add(false, target)
	resp, err := f.client.Do(req)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "com.amazonaws.dynamodb.v20120810#InternalServerError", "dynamodb local unavailable: "+err.Error())
		return
	}
	defer resp.Body.Close()
	decided = resp.StatusCode < 500
	adm.hold(r.Context())
	if len(streams) > 0 && resp.StatusCode == http.StatusOK {
		// DynamoDB Local answers once the write is applied, stream records
		// included.
		f.positions.wrote(streams...)
	}
	if commitTargets[target] && resp.StatusCode == http.StatusOK && f.barrier != nil {
		f.answerCommitted(wctx, w, resp, adm)
		return
	}
	if target == "DynamoDBStreams_20120810.GetRecords" && resp.StatusCode == http.StatusOK {
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", err.Error())
			return
		}
		if annotated, err := f.annotate(r.Context(), body, out); err != nil {
			f.cfg.Logger.Warn("annotate stream records", "err", err.Error())
		} else {
			out = annotated
		}
		relay(w, resp, out)
		return
	}
	if tableTargets[target] && resp.StatusCode == http.StatusOK {
		var in struct{ TableName string }
		if json.Unmarshal(body, &in) == nil {
			f.positions.forget(in.TableName)
			if f.limits != nil {
				f.limits.schemas.forget(in.TableName)
				f.limits.forgetImages(in.TableName)
			}
			if target == "DynamoDB_20120810.DeleteTable" {
				if err := f.ttl.forget(in.TableName); err != nil {
					f.cfg.Logger.Warn("forget ttl setting", "table", in.TableName, "err", err.Error())
				}
			}
		}
	}
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", "read dynamodb local's answer: "+err.Error())
		return
	}
	if refused := adm.chargeAnswer(wctx, resp.StatusCode, out); refused != nil {
		writeErrorBody(w, refused.status, refused.body)
		return
	}
	if resp.StatusCode == http.StatusOK && staleOps[op] {
		out = f.limits.staleAnswer(r.Context(), op, body, out)
	}
	if adm != nil && resp.StatusCode == http.StatusOK {
		out = adm.rewrite.answer(out)
	}
	relay(w, resp, out)
}

// answerCommitted passes on DynamoDB Local's answer to a transaction once
// the transaction is committed. If that cannot be known (DynamoDB Local is
// gone), the client gets an InternalServerError, whose outcome DynamoDB
// leaves open too: the SDK retries with the same ClientRequestToken, which
// DynamoDB Local does not apply twice.
func (f *Front) answerCommitted(ctx context.Context, w http.ResponseWriter, resp *http.Response, adm *admission) {
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", "read dynamodb local's answer: "+err.Error())
		return
	}
	if err := f.barrier.wait(ctx); err != nil {
		f.cfg.Logger.Warn("commit barrier", "err", err.Error())
		writeError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", "transaction outcome unknown: "+err.Error())
		return
	}
	adm.chargeAnswer(ctx, resp.StatusCode, out)
	relay(w, resp, out)
}

// answer writes the result of an operation the front serves itself.
func (f *Front) answer(w http.ResponseWriter, op func() (any, error)) {
	out, err := op()
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		writeError(w, ae.status, ae.code, ae.msg)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", err.Error())
		return
	}
	body, err := json.Marshal(out)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", fmt.Sprintf("front-%d", time.Now().UnixNano()))
	send(w, http.StatusOK, body)
}

// relay passes on DynamoDB Local's answer with body in place of its own.
func relay(w http.ResponseWriter, resp *http.Response, body []byte) {
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	send(w, resp.StatusCode, body)
}

// send writes every answer the front gives, with the CRC32 of its bytes in
// X-Amz-Crc32. The SDK checks that header on every DynamoDB response and
// takes a missing one for 0; DynamoDB Local sends none with its errors
// (ConditionalCheckFailedException, TransactionCanceledException,
// ResourceNotFoundException, ...), and a body the front rewrites would
// outdate the one it does send.
func send(w http.ResponseWriter, status int, body []byte) {
	body = toAWS(body)
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// DynamoDB Local names its region "ddblocal" in ARNs and in stream records'
// awsRegion; AWS names one region everywhere, the stack's. The front gives
// clients the stack's region and DynamoDB Local its own: ARNs a client sends
// back (a stream's, inside a shard iterator) are turned back on the way in.
var (
	localARN  = []byte("arn:aws:dynamodb:ddblocal:")
	awsARN    = []byte("arn:aws:dynamodb:" + Region + ":")
	localZone = []byte(`"awsRegion":"ddblocal"`)
	awsZone   = []byte(`"awsRegion":"` + Region + `"`)
)

// Region is the region the front answers in.
const Region = "us-east-1"

func toAWS(body []byte) []byte {
	if !bytes.Contains(body, []byte("ddblocal")) {
		return body
	}
	return bytes.ReplaceAll(bytes.ReplaceAll(body, localARN, awsARN), localZone, awsZone)
}

func toLocal(body []byte) []byte {
	if !bytes.Contains(body, awsARN) {
		return body
	}
	return bytes.ReplaceAll(body, awsARN, localARN)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeErrorBody(w, status, map[string]string{"__type": typ, "message": msg})
}

// writeErrorBody answers an error whose body carries more than a message.
func writeErrorBody(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", fmt.Sprintf("front-%d", time.Now().UnixNano()))
	send(w, status, body)
}

// writeTargets are the operations that change items, and so write stream records.
var writeTargets = map[string]bool{
	"DynamoDB_20120810.PutItem":               true,
	"DynamoDB_20120810.UpdateItem":            true,
	"DynamoDB_20120810.DeleteItem":            true,
	"DynamoDB_20120810.BatchWriteItem":        true,
	"DynamoDB_20120810.TransactWriteItems":    true,
	"DynamoDB_20120810.ExecuteStatement":      true,
	"DynamoDB_20120810.BatchExecuteStatement": true,
	"DynamoDB_20120810.ExecuteTransaction":    true,
}

// tableTargets are the operations after which a table's stream may be another.
var tableTargets = map[string]bool{
	"DynamoDB_20120810.CreateTable": true,
	"DynamoDB_20120810.UpdateTable": true,
	"DynamoDB_20120810.DeleteTable": true,
}

// writtenTables names the tables a write may change, each once: tablesOf's
// for the item APIs, the target of each INSERT, UPDATE and DELETE statement
// for PartiQL.
func writtenTables(op string, body []byte) []string {
	var names []string
	switch op {
	case "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction":
		var req struct {
			Statement                      string
			Statements, TransactStatements []struct{ Statement string }
		}
		if json.Unmarshal(body, &req) != nil {
			return nil
		}
		stmts := []string{req.Statement}
		for _, s := range append(req.Statements, req.TransactStatements...) {
			stmts = append(stmts, s.Statement)
		}
		for _, s := range stmts {
			if t := statementTable(s); t != "" {
				names = append(names, t)
			}
		}
	default:
		names = tablesOf(op, body)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// statementTable reads the table a PartiQL INSERT INTO, UPDATE or DELETE FROM
// statement writes, its name plain or in double quotes; "" for any other
// statement.
func statementTable(stmt string) string {
	rest := stmt
	word := func() string {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		i := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsLetter(r) })
		if i < 0 {
			i = len(rest)
		}
		w := rest[:i]
		rest = rest[i:]
		return strings.ToUpper(w)
	}
	switch word() {
	case "INSERT":
		if word() != "INTO" {
			return ""
		}
	case "DELETE":
		if word() != "FROM" {
			return ""
		}
	case "UPDATE":
	default:
		return ""
	}
	rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
	if strings.HasPrefix(rest, `"`) {
		var name strings.Builder
		for i := 1; i < len(rest); i++ {
			if rest[i] != '"' {
				name.WriteByte(rest[i])
				continue
			}
			if i+1 < len(rest) && rest[i+1] == '"' { // "" stands for one "
				name.WriteByte('"')
				i++
				continue
			}
			return name.String()
		}
		return ""
	}
	i := strings.IndexFunc(rest, func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') })
	if i < 0 {
		i = len(rest)
	}
	return rest[:i]
}

// tablesOf names the tables a request touches, for the fault hook and the
// stream follower.
func tablesOf(op string, body []byte) []string {
	var req struct {
		TableName     string
		StreamArn     string
		ShardIterator string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var out []string
	if req.TableName != "" {
		out = append(out, req.TableName)
	}
	for name := range req.RequestItems {
		out = append(out, name)
	}
	for _, ti := range req.TransactItems {
		for _, a := range ti {
			out = append(out, a.TableName)
		}
	}
	for _, arn := range []string{req.StreamArn, req.ShardIterator} {
		if t := tableFromStreamARN(arn); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// tableFromStreamARN reads the table out of ".../table/NAME/stream/...".
func tableFromStreamARN(arn string) string {
	i := strings.Index(arn, ":table/")
	if i < 0 {
		return ""
	}
	rest := arn[i+len(":table/"):]
	if j := strings.Index(rest, "/stream/"); j >= 0 {
		return rest[:j]
	}
	return ""
}
