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

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
)

// MaxIdempotencyKeyLen bounds an Idempotency-Key.
const MaxIdempotencyKeyLen = 255

func (h *Handler) placeOrder(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	in, err := decodeOrderRequest(body)
	if err != nil {
		return err
	}
	userID := r.PathValue("userId")
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		o, err := h.deps.Store.PlaceOrder(r.Context(), userID, in, nil, nil)
		if err != nil {
			return err
		}
		h.placed(r.Context())
		resp, err := orderResponse(o)
		if err != nil {
			return err
		}
		replay(w, resp)
		return nil
	}
	if !validIdempotencyKey(key) {
		return invalid("Idempotency-Key", fmt.Sprintf("must be 1 to %d visible ASCII characters", MaxIdempotencyKeyLen))
	}
	sum := sha256.Sum256(body)
	idem := store.Idempotency{Key: idempotencyRecord("orders", userID, key), RequestHash: hex.EncodeToString(sum[:])}
	if done, err := h.recall(r.Context(), w, idem); done || err != nil {
		return err
	}
	o, err := h.deps.Store.PlaceOrder(r.Context(), userID, in, &idem, orderResponse)
	switch code := errcode.Of(err); {
	case err == nil:
		h.placed(r.Context())
		resp, err := orderResponse(o)
		if err != nil {
			return err
		}
		replay(w, resp)
		return nil
	case errors.Is(err, store.ErrKeyUsed):
		return h.replayUsed(r.Context(), w, idem)
	case code == errcode.Conflict || code == errcode.NotFound:
		// A refusal is an answer too: remember it, so a replay gets it
		// rather than a different outcome later.
		p := problemFor(err)
		b, _ := json.Marshal(p)
		resp := store.Response{Status: p.Status, ContentType: "application/problem+json", Body: string(b)}
		switch rerr := h.deps.Store.Remember(r.Context(), idem, resp); {
		case errors.Is(rerr, store.ErrKeyUsed):
			return h.replayUsed(r.Context(), w, idem)
		case rerr != nil:
			return rerr
		}
		return err
	default:
		return err
	}
}

// decodeOrderRequest decodes and validates an order placement body.
func decodeOrderRequest(body []byte) (orders.Request, error) {
	var in orders.Request
	if err := decodeJSON(body, &in); err != nil {
		return orders.Request{}, err
	}
	if err := in.Validate(); err != nil {
		return orders.Request{}, err
	}
	return in, nil
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
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// recall replays the remembered response of idem, if any; done reports that
// the request is answered.
func (h *Handler) recall(ctx context.Context, w http.ResponseWriter, idem store.Idempotency) (done bool, err error) {
	rem, ok, err := h.deps.Store.Recall(ctx, idem.Key)
	if err != nil || !ok {
		return false, err
	}
	if rem.RequestHash != idem.RequestHash {
		return true, errcode.Errorf(errcode.Conflict, "the Idempotency-Key was used for a request with another body")
	}
	w.Header().Set("Idempotent-Replayed", "true")
	replay(w, rem.Response)
	return true, nil
}

// replayUsed answers a request whose key another request claimed first.
func (h *Handler) replayUsed(ctx context.Context, w http.ResponseWriter, idem store.Idempotency) error {
	done, err := h.recall(ctx, w, idem)
	if err != nil {
		return err
	}
	if !done {
		return errcode.Errorf(errcode.Conflict, "a request with this Idempotency-Key is in progress")
	}
	return nil
}

func orderResponse(o orders.Order) (store.Response, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return store.Response{}, fmt.Errorf("encode order %s: %w", o.OrderID, err)
	}
	return store.Response{
		Status: http.StatusCreated, ContentType: "application/json",
		Location: "/users/" + o.UserID + "/orders/" + o.OrderID, Body: string(b),
	}, nil
}

func replay(w http.ResponseWriter, resp store.Response) {
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

func (h *Handler) getOrder(w http.ResponseWriter, r *http.Request) error {
	o, err := h.deps.Store.GetOrder(r.Context(), r.PathValue("userId"), r.PathValue("orderId"))
	if err != nil {
		return err
	}
	etag(w, o.Version)
	write(w, http.StatusOK, o)
	return nil
}

func (h *Handler) cancelOrder(w http.ResponseWriter, r *http.Request) error {
	o, err := h.deps.Store.CancelOrder(r.Context(), r.PathValue("userId"), r.PathValue("orderId"))
	if err != nil {
		return err
	}
	etag(w, o.Version)
	write(w, http.StatusOK, o)
	return nil
}

func (h *Handler) moveOrder(w http.ResponseWriter, r *http.Request) error {
	version, err := ifMatch(r)
	if err != nil {
		return err
	}
	var in orders.StatusChange
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	o, err := h.deps.Store.MoveOrder(r.Context(), r.PathValue("userId"), r.PathValue("orderId"), in.Status, version)
	if err != nil {
		return err
	}
	etag(w, o.Version)
	write(w, http.StatusOK, o)
	return nil
}

func (h *Handler) listUserOrders(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pageParams(r)
	f, err := fieldsOf(err)
	if err != nil {
		return err
	}
	status := orders.Status(r.URL.Query().Get("status"))
	if r.URL.Query().Has("status") && !status.Valid() {
		f.Add("status", "must be one of PLACED, SHIPPED, DELIVERED, CANCELLED")
	}
	if err := f.Err(); err != nil {
		return err
	}
	page, err := h.deps.Store.ListUserOrders(r.Context(), r.PathValue("userId"), status, p.limit, p.after)
	if err != nil {
		return err
	}
	return writePage(h, w, p, page)
}

func (h *Handler) listOpenOrders(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pageParams(r)
	f, err := fieldsOf(err)
	if err != nil {
		return err
	}
	status := orders.Status(r.URL.Query().Get("status"))
	if !status.Open() {
		f.Add("status", "is required: PLACED or SHIPPED")
	}
	if err := f.Err(); err != nil {
		return err
	}
	page, err := h.deps.Store.ListOpenOrders(r.Context(), status, p.limit, p.after)
	if err != nil {
		return err
	}
	return writePage(h, w, p, page)
}
