package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/errcode"
)

// MaxIdempotencyKeyLen bounds an Idempotency-Key.
const MaxIdempotencyKeyLen = 255

// storedResponse is a response kept under an Idempotency-Key for replay: the
// idempotency item's "response" attribute, in the layout every release since
// 0.2.0 reads (a replay may reach either release during a canary).
type storedResponse struct {
	Status      int    `dynamodbav:"status"`
	ContentType string `dynamodbav:"contentType"`
	Location    string `dynamodbav:"location,omitempty"`
	Body        string `dynamodbav:"body"`
}

// idempotent answers a write that honours the Idempotency-Key header, the
// one place the API's idempotency lives. Without a key, write runs
// unclaimed. With one, a key used before replays the response its first
// request got (409 when this request's body differs); otherwise write runs
// with a claim of the key, and the store keeps the response respond makes of
// the result in the write's own transaction. A refusal (409, 404) is kept
// too, so a replay gets the same answer rather than a later outcome.
func idempotent[T any](h *Handler, w http.ResponseWriter, r *http.Request, route, userID string, body []byte,
	write func(*store.Claim[T]) (T, error), respond func(T) (storedResponse, error)) error {
	ctx := r.Context()
	keys, sent := r.Header[http.CanonicalHeaderKey("Idempotency-Key")]
	if !sent {
		v, err := write(nil)
		if err != nil {
			return err
		}
		resp, err := respond(v)
		if err != nil {
			return err
		}
		replay(w, resp)
		return nil
	}
	// A header sent empty is a key that is not one, not a request
	// without a key: its client meant its retries to be safe.
	key := strings.Join(keys, ",")
	if !validIdempotencyKey(key) {
		return invalid("Idempotency-Key", fmt.Sprintf("must be 1 to %d visible ASCII characters", MaxIdempotencyKeyLen))
	}
	sum := sha256.Sum256(body)
	record, hash := idempotencyRecord(route, userID, key), hex.EncodeToString(sum[:])
	if done, err := h.recall(ctx, w, record, hash); done || err != nil {
		return err
	}
	claim := &store.Claim[T]{Key: record, RequestHash: hash, Keep: func(v T) (types.AttributeValue, error) {
		resp, err := respond(v)
		if err != nil {
			return nil, err
		}
		return attributevalue.Marshal(resp)
	}}
	v, err := write(claim)
	switch code := errcode.Of(err); {
	case err == nil:
		resp, err := respond(v)
		if err != nil {
			return err
		}
		replay(w, resp)
		return nil
	case errors.Is(err, store.ErrKeyUsed):
		return h.replayUsed(ctx, w, record, hash)
	case code == errcode.Conflict || code == errcode.NotFound:
		p := problemFor(err)
		b, merr := json.Marshal(p)
		if merr != nil {
			return fmt.Errorf("encode refusal: %w", merr)
		}
		kept, merr := attributevalue.Marshal(storedResponse{Status: p.Status, ContentType: "application/problem+json", Body: string(b)})
		if merr != nil {
			return fmt.Errorf("encode refusal: %w", merr)
		}
		switch rerr := h.deps.Store.Remember(ctx, record, hash, kept); {
		case errors.Is(rerr, store.ErrKeyUsed):
			return h.replayUsed(ctx, w, record, hash)
		case rerr != nil:
			return rerr
		}
		return err
	default:
		return err
	}
}

// idempotencyRecord is the record key of a client's Idempotency-Key: the
// route, the user and the key, each prefixed with its length, so no user id
// and key can spell another user's record ("a" with "b#c" and "a#b" with "c"
// are two records).
func idempotencyRecord(route, userID, key string) string {
	var b strings.Builder
	for _, part := range []string{route, userID, key} {
		b.WriteString(strconv.Itoa(len(part)))
		b.WriteByte(':')
		b.WriteString(part)
	}
	return b.String()
}

func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' { // visible ASCII: no space, no control
			return false
		}
	}
	return true
}

// recall replays the response kept under key, if any; done reports that
// the request is answered.
func (h *Handler) recall(ctx context.Context, w http.ResponseWriter, key, requestHash string) (done bool, err error) {
	rem, ok, err := h.deps.Store.Recall(ctx, key)
	if err != nil || !ok {
		return false, err
	}
	if rem.RequestHash != requestHash {
		return true, errcode.Errorf(errcode.Conflict, "the Idempotency-Key was used for a request with another body")
	}
	if rem.Kept == nil {
		return true, fmt.Errorf("replay idempotency key %s: no response kept", key)
	}
	var resp storedResponse
	if err := attributevalue.Unmarshal(rem.Kept, &resp); err != nil {
		return true, fmt.Errorf("replay idempotency key %s: %w", key, err)
	}
	w.Header().Set("Idempotent-Replayed", "true")
	replay(w, resp)
	return true, nil
}

// replayUsed answers a request whose key another request claimed first.
func (h *Handler) replayUsed(ctx context.Context, w http.ResponseWriter, key, requestHash string) error {
	done, err := h.recall(ctx, w, key, requestHash)
	if err != nil {
		return err
	}
	if !done {
		return errcode.Errorf(errcode.Conflict, "a request with this Idempotency-Key is in progress")
	}
	return nil
}

func replay(w http.ResponseWriter, resp storedResponse) {
	w.Header().Set("Content-Type", resp.ContentType)
	if resp.Location != "" {
		w.Header().Set("Location", resp.Location)
	}
	if resp.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(resp.Status)
	_, _ = io.WriteString(w, resp.Body)
}
