package httpapi

import (
	"net/http"

	"github.com/shopstream/shopstream/shared/products"
)

func (h *Handler) createProduct(w http.ResponseWriter, r *http.Request) error {
	var in products.New
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	p, err := h.deps.Store.CreateProduct(r.Context(), in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/products/"+p.ProductID)
	productTag(w, p.Version)
	write(w, http.StatusCreated, p)
	return nil
}

func (h *Handler) getProduct(w http.ResponseWriter, r *http.Request) error {
	p, err := h.deps.Store.GetProduct(r.Context(), r.PathValue("productId"))
	if err != nil {
		return err
	}
	productTag(w, p.Version)
	if noneMatch(r, p.Version) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	write(w, http.StatusOK, p)
	return nil
}

func (h *Handler) patchProduct(w http.ResponseWriter, r *http.Request) error {
	version, err := ifMatch(r)
	if err != nil {
		return err
	}
	var in products.Patch
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	if in.Stock != nil && version == nil {
		// An absolute stock read earlier would erase the sales since.
		return invalid("stock", "an absolute stock needs If-Match with the version it was read at; send stockDelta to add or remove units")
	}
	p, err := h.deps.Store.PatchProduct(r.Context(), r.PathValue("productId"), in, version)
	if err != nil {
		return err
	}
	productTag(w, p.Version)
	write(w, http.StatusOK, p)
	return nil
}

func (h *Handler) deleteProduct(w http.ResponseWriter, r *http.Request) error {
	version, err := ifMatch(r)
	if err != nil {
		return err
	}
	if err := h.deps.Store.DeleteProduct(r.Context(), r.PathValue("productId"), version); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) listProducts(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pageParams(r)
	f, err := fieldsOf(err)
	if err != nil {
		return err
	}
	category := r.URL.Query().Get("category")
	switch problem := products.CategoryFilterProblem(category); {
	case category == "":
		f.Add("category", "is required: products are listed by category (or use /search)")
	case problem != "":
		f.Add("category", "%s", problem)
	}
	if err := f.Err(); err != nil {
		return err
	}
	page, err := h.deps.Store.ListProductsByCategory(r.Context(), category, p.limit, p.after)
	if err != nil {
		return err
	}
	return writePage(h, w, r, p, page)
}
