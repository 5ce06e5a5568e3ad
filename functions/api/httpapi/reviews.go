package httpapi

import (
	"net/http"

	"github.com/shopstream/shopstream/shared/reviews"
)

func (h *Handler) putReview(w http.ResponseWriter, r *http.Request) error {
	var in reviews.Input
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	rv, created, err := h.deps.Store.PutReview(r.Context(), r.PathValue("productId"), r.PathValue("userId"), in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", r.URL.EscapedPath())
	}
	etag(w, rv.Version)
	write(w, status, rv)
	return nil
}

func (h *Handler) deleteReview(w http.ResponseWriter, r *http.Request) error {
	if err := h.deps.Store.DeleteReview(r.Context(), r.PathValue("productId"), r.PathValue("userId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) listProductReviews(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pageParams(r)
	if err != nil {
		return err
	}
	id := r.PathValue("productId")
	page, err := h.deps.Store.ListProductReviews(r.Context(), id, p.limit, p.after)
	if err != nil {
		return err
	}
	if len(page.Items) == 0 && p.after == nil {
		// An empty first page: say whether the product exists at all.
		if _, err := h.deps.Store.GetProduct(r.Context(), id); err != nil {
			return err
		}
	}
	return writePage(h, w, r, p, page)
}

func (h *Handler) listUserReviews(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pageParams(r)
	if err != nil {
		return err
	}
	page, err := h.deps.Store.ListUserReviews(r.Context(), r.PathValue("userId"), p.limit, p.after)
	if err != nil {
		return err
	}
	return writePage(h, w, r, p, page)
}
