package search

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search/query"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Near-real-time search. OpenSearch makes a write searchable at its index's
// next refresh, every index.refresh_interval (1 s by default), or at once
// for a write sent with ?refresh=true; ?refresh=wait_for answers once a
// refresh has made the write searchable; GET of a document by id is
// real-time and sees it at once ("Refresh Index API",
// https://docs.opensearch.org/latest/api-reference/index-apis/refresh/). Each index keeps a second, in-memory bleve
// index, its view, which is what searches and counts read; the writes of a
// refresh interval wait in a batch and are applied to the view in one go at
// the refresh. The live bleve index keeps serving GETs, versions and
// persistence. After a restart the view is rebuilt from the live index, as
// OpenSearch's recovery ends with a refresh.
//
// Not modelled: OpenSearch skips the scheduled refreshes of a shard that
// has seen no search for index.search.idle.after (30 s) when the interval is
// not set explicitly, and the next search then waits for a refresh (kinder
// than this view, which never waits). _flush does not refresh, as
// OpenSearch's refreshes only its internal searcher.

// defaultRefreshInterval is OpenSearch's index.refresh_interval.
const defaultRefreshInterval = time.Second

// refreshTick is how often the server looks for indexes due a refresh.
const refreshTick = 50 * time.Millisecond

// refreshInterval reads index.refresh_interval: 0 for "-1" (no scheduled
// refresh).
func refreshInterval(settings map[string]string) (time.Duration, error) {
	v, ok := settings["index.refresh_interval"]
	if !ok {
		return defaultRefreshInterval, nil
	}
	if v == "-1" {
		return 0, nil
	}
	d, err := parseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("failed to parse value [%s] for setting [index.refresh_interval]", v)
	}
	return d, nil
}

// viewOp is one write to apply to the view at the next refresh: a document
// to index, or a deletion (doc nil).
type viewOp struct {
	id  string
	doc *document.Document
}

// openView creates the index's in-memory view.
func (ix *index) openView() error {
	bm, err := bleveMapping()
	if err != nil {
		return err
	}
	v, err := bleve.NewUsing("", bm, scorch.Name, scorch.Name, nil)
	if err != nil {
		return fmt.Errorf("index %s: create search view: %w", ix.name, err)
	}
	ix.view = v
	ix.viewPending = v.NewBatch()
	ix.refreshed = make(chan struct{})
	ix.nextRefresh = time.Now().Add(ix.refreshEvery)
	return nil
}

// rebuildView fills a new view with every live document, a page at a
// time in id order. A document is rebuilt from its source with the mapping
// as it is now; one that no longer parses under it (the mapping changed
// since, which OpenSearch allows for fields it did not index) keeps only its
// id, version and source in the view: found by ids and match_all, not by its
// fields.
func (ix *index) rebuildView(logger *slog.Logger) error {
	const page = 500
	m := ix.mapping.Load()
	var after []string
	for {
		req := bleve.NewSearchRequestOptions(query.NewMatchAllQuery(), page, 0, false)
		req.SortBy([]string{"_id"})
		if after != nil {
			req.SearchAfter = after
		}
		req.Fields = []string{fieldSource, fieldMeta}
		res, err := ix.bleve.Search(req)
		if err != nil {
			return fmt.Errorf("index %s: rebuild search view: %w", ix.name, err)
		}
		b := ix.view.NewBatch()
		for _, h := range res.Hits {
			src, _ := h.Fields[fieldSource].(string)
			meta, _ := h.Fields[fieldMeta].(string)
			st, ok := decodeDocMeta([]byte(meta))
			if !ok {
				return fmt.Errorf("index %s: rebuild search view: document %q has no version", ix.name, h.ID)
			}
			db := newDocBuilder(ix, m, h.ID)
			parsed, err := decodeSource([]byte(src))
			if err == nil {
				if e := db.build(parsed, []byte(src)); e != nil {
					err = e
				}
			}
			if err != nil {
				logger.Warn("search: a document no longer parses under its index's mapping; searchable by id only until it is written again",
					"index", ix.name, "id", h.ID, "err", err.Error())
				db = newDocBuilder(ix, m, h.ID)
				db.doc.AddField(document.NewTextFieldWithIndexingOptions(fieldSource, nil, []byte(src), bleveindex.StoreField))
			}
			db.doc.AddField(document.NewTextFieldWithIndexingOptions(fieldMeta, nil, encodeDocMeta(st), bleveindex.StoreField))
			if err := b.IndexAdvanced(db.doc); err != nil {
				return fmt.Errorf("index %s: rebuild search view: %w", ix.name, err)
			}
		}
		if err := ix.view.Batch(b); err != nil {
			return fmt.Errorf("index %s: rebuild search view: %w", ix.name, err)
		}
		if len(res.Hits) < page {
			return nil
		}
		after = []string{res.Hits[len(res.Hits)-1].ID}
	}
}

// queueView keeps a committed batch's writes for the next refresh.
func (ix *index) queueView(ops []viewOp) {
	if len(ops) == 0 {
		return
	}
	ix.viewMu.Lock()
	defer ix.viewMu.Unlock()
	for _, op := range ops {
		if op.doc == nil {
			ix.viewPending.Delete(op.id)
			continue
		}
		_ = ix.viewPending.IndexAdvanced(op.doc) // fails only for an empty id
	}
}

// refresh makes every write so far searchable; ok is false for an index
// closed meanwhile.
func (ix *index) refresh() (ok bool, err error) {
	if e := ix.acquire(); e != nil {
		return false, nil
	}
	defer ix.life.RUnlock()
	ix.viewMu.Lock()
	defer ix.viewMu.Unlock()
	return true, ix.refreshLocked(time.Now())
}

// releaseWaiters answers every write waiting for a refresh of an index
// being closed.
func (ix *index) releaseWaiters() {
	ix.viewMu.Lock()
	defer ix.viewMu.Unlock()
	if ix.refreshed != nil {
		close(ix.refreshed)
		ix.refreshed = nil
	}
}

func (ix *index) refreshLocked(now time.Time) error {
	if ix.viewPending.Size() > 0 {
		if err := ix.view.Batch(ix.viewPending); err != nil {
			return fmt.Errorf("index %s: refresh: %w", ix.name, err)
		}
		ix.viewPending = ix.view.NewBatch()
	}
	close(ix.refreshed)
	ix.refreshed = make(chan struct{})
	ix.nextRefresh = now.Add(ix.refreshEvery)
	return nil
}

// refreshIfDue runs the scheduled refresh when its time has come.
func (ix *index) refreshIfDue(now time.Time) error {
	ix.viewMu.Lock()
	defer ix.viewMu.Unlock()
	if ix.refreshEvery <= 0 || now.Before(ix.nextRefresh) {
		return nil
	}
	return ix.refreshLocked(now)
}

// maxRefreshListeners is OpenSearch's index.max_refresh_listeners: past it
// a write asking to wait for a refresh forces one.
const maxRefreshListeners = 1000

// waitRefresh returns once a refresh after the call has run (an index
// without scheduled refreshes waits for one asked for), or the index is
// closed.
func (ix *index) waitRefresh(ctx context.Context) error {
	ix.viewMu.Lock()
	ch := ix.refreshed
	if ch == nil {
		ix.viewMu.Unlock()
		return nil // closed
	}
	ix.waiters++
	force := ix.waiters > maxRefreshListeners
	ix.viewMu.Unlock()
	defer func() {
		ix.viewMu.Lock()
		ix.waiters--
		ix.viewMu.Unlock()
	}()
	if force {
		_, err := ix.refresh()
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refreshParam reads a write's ?refresh: "" for none, "true" or "wait_for".
func refreshParam(q *request) (string, *apiError) {
	v, ok := q.param("refresh")
	switch {
	case !ok || v == "false":
		return "", nil
	case v == "" || v == "true":
		return "true", nil
	case v == "wait_for":
		return v, nil
	}
	return "", illegalArgument("Unknown value for refresh: [%s].", v)
}

// afterWrite refreshes as a write's ?refresh asked.
func (ix *index) afterWrite(ctx context.Context, refresh string) error {
	switch refresh {
	case "true":
		_, err := ix.refresh()
		return err
	case "wait_for":
		return ix.waitRefresh(ctx)
	}
	return nil
}

// scheduleRefreshes runs every index's scheduled refreshes until stop is
// closed.
func (s *Server) scheduleRefreshes(stop <-chan struct{}) {
	t := time.NewTicker(refreshTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.mu.RLock()
			ixs := make([]*index, 0, len(s.indexes))
			for _, ix := range s.indexes {
				ixs = append(ixs, ix)
			}
			s.mu.RUnlock()
			for _, ix := range ixs {
				if e := ix.acquire(); e != nil {
					continue
				}
				if err := ix.refreshIfDue(now); err != nil {
					s.logger.Error("search: scheduled refresh", "index", ix.name, "err", err.Error())
				}
				ix.life.RUnlock()
			}
		}
	}
}
