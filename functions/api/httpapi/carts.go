package httpapi

import (
	"net/http"

	"github.com/shopstream/shopstream/shared/carts"
)

func (h *Handler) putCartLine(w http.ResponseWriter, r *http.Request) error {
	var in carts.Input
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	v, err := h.deps.Store.SetCartLine(r.Context(), r.PathValue("userId"), r.PathValue("productId"), *in.Quantity)
	if err != nil {
		return err
	}
	write(w, http.StatusOK, v)
	return nil
}

func (h *Handler) getCart(w http.ResponseWriter, r *http.Request) error {
	v, err := h.deps.Store.GetCart(r.Context(), r.PathValue("userId"))
	if err != nil {
		return err
	}
	write(w, http.StatusOK, v)
	return nil
}
