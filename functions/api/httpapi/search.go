package httpapi

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/productsearch"
)

// Searcher answers full-text product searches.
type Searcher interface {
	Search(context.Context, productsearch.Query) (productsearch.Result, error)
}

// MaxQueryLen bounds the q parameter of /search.
const MaxQueryLen = 200

// searchPosition is where a search page stopped: the place of its last hit
// (the next page goes on after it, whatever was indexed between the two),
// and the offset of the next hit, which bounds the list at MaxWindow hits
// and is what a cursor without a place (one of a release before 0.18.0)
// goes on from. A release before 0.18.0 reads the offset alone.
type searchPosition struct {
	From  int                  `json:"from"`
	After *productsearch.Place `json:"after,omitempty"`
	Shown []string             `json:"shown,omitempty"`
	Next  string               `json:"next,omitempty"`
}

func (h *Handler) search(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pageParams(r)
	f, err := fieldsOf(err)
	if err != nil {
		return err
	}
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	switch {
	case q == "":
		f.Add("q", "is required")
	case !utf8.ValidString(q) || utf8.RuneCountInString(q) > MaxQueryLen:
		f.Add("q", "must be UTF-8 text of at most %d characters", MaxQueryLen)
	}
	category := r.URL.Query().Get("category")
	if r.URL.Query().Has("category") && !products.ValidCategory(category) {
		f.Add("category", "%s", products.CategoryFilterProblem(category))
	}
	var pos searchPosition
	if len(p.raw) > 0 {
		if err := jsonUnmarshal(p.raw, &pos); err != nil || pos.From < 0 || pos.From >= productsearch.MaxWindow ||
			(pos.After != nil && (pos.After.ProductID == "" || math.IsNaN(pos.After.Score) || math.IsInf(pos.After.Score, 0))) ||
			len(pos.Shown) > productsearch.ShownKept || slices.Contains(pos.Shown, "") {
			f.Add("cursor", "not a cursor of this list")
		}
	}
	if err := f.Err(); err != nil {
		return err
	}
	if h.deps.Search == nil {
		return errcode.Errorf(errcode.Unavailable, "search is not configured")
	}
	// One hit more than the page, when the window has room for it: it says
	// whether a next page exists, whatever the total says (hits shown and
	// deleted since leave the total below the count of hits shown).
	size := min(p.limit, productsearch.MaxWindow-pos.From)
	ask := size
	if pos.From+size < productsearch.MaxWindow {
		ask++
	}
	res, err := h.deps.Search.Search(r.Context(), productsearch.Query{Text: q, Category: category, From: pos.From, Size: ask, After: pos.After, Shown: pos.Shown, Next: pos.Next})
	if err != nil {
		return err
	}
	more := len(res.Hits) > size
	shown := min(len(res.Hits), size)
	out := list[productsearch.Document]{Items: res.Hits[:shown]}
	if next := pos.From + shown; more && next < productsearch.MaxWindow {
		var after *productsearch.Place
		var before []string
		if shown > 0 && shown <= len(res.Places) {
			after = res.Places[shown-1] // nil: the next page goes on from the offset
			for _, pl := range res.Places[max(0, shown-1-productsearch.ShownKept) : shown-1] {
				if pl != nil {
					before = append(before, pl.ProductID)
				}
			}
		}
		var following string // the extra hit: the next page's first
		if shown < len(res.Places) && res.Places[shown] != nil {
			following = res.Places[shown].ProductID
		}
		if after == nil {
			before, following = nil, ""
		}
		c, err := h.deps.Cursors.Encode(p.binding, searchPosition{From: next, After: after, Shown: before, Next: following})
		if err != nil {
			return err
		}
		out.NextCursor = c
	}
	write(w, http.StatusOK, out)
	return nil
}
