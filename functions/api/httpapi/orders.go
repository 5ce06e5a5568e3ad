package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/orders"
)

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
	return idempotent(h, w, r, "orders", userID, body, func(claim *store.Claim[orders.Order]) (orders.Order, error) {
		if err := in.ValidateIDs(); err != nil {
			return orders.Order{}, err // not kept for the key: the same body gets it again
		}
		o, err := h.deps.Store.PlaceOrder(r.Context(), userID, in, claim)
		if err == nil {
			h.placed(r.Context())
		}
		return o, err
	}, orderResponse)
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

func orderResponse(o orders.Order) (storedResponse, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return storedResponse{}, fmt.Errorf("encode order %s: %w", o.OrderID, err)
	}
	return storedResponse{
		Status: http.StatusCreated, ContentType: "application/json",
		Location: "/users/" + url.PathEscape(o.UserID) + "/orders/" + o.OrderID, Body: string(b),
	}, nil
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
	return writePage(h, w, r, p, page)
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
	return writePage(h, w, r, p, page)
}
