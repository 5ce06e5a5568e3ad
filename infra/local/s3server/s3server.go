// Package s3server is the stack's S3 endpoint (path-style REST), on gofakes3,
// in memory or in a bolt file under the data dir, with object tagging of its
// own (tagging.go).
package s3server

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	bolt "go.etcd.io/bbolt"
)

// Server is an S3 endpoint.
type Server struct {
	backend gofakes3.Backend
	handler http.Handler
	closer  func() error
}

// New opens the S3 service; dir == "" keeps objects in memory. Every bucket in
// buckets is created if missing.
func New(dir string, buckets ...string) (*Server, error) {
	s := &Server{closer: func() error { return nil }}
	if dir == "" {
		s.backend = s3mem.New()
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("open s3 store: %w", err)
		}
		db, err := bolt.Open(filepath.Join(dir, "s3.bolt"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
		if err != nil {
			return nil, fmt.Errorf("open s3 store: %w", err)
		}
		s.backend = s3bolt.New(db)
		s.closer = db.Close
	}
	tags, err := newTagging(dir, s.backend, gofakes3.New(s.backend, gofakes3.WithAutoBucket(false)).Server())
	if err != nil {
		_ = s.closer()
		return nil, err
	}
	s.handler = &faulting{next: tags}
	objects := s.closer
	s.closer = func() error { return errors.Join(tags.close(), objects()) }
	for _, name := range buckets {
		exists, err := s.backend.BucketExists(name)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("check bucket %s: %w", name, err), s.closer())
		}
		if exists {
			continue
		}
		if err := s.backend.CreateBucket(name); err != nil {
			return nil, errors.Join(fmt.Errorf("create bucket %s: %w", name, err), s.closer())
		}
	}
	return s, nil
}

// ServeHTTP answers S3 REST requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key := splitPath(r.URL.Path)
	if key == "" && r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2" {
		listV2(s.handler, w, r)
		return
	}
	if key != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		switch status, cond := s.conditions(bucket, key, r); status {
		case http.StatusPreconditionFailed:
			preconditionFailed(w, r, cond)
			return
		case http.StatusNotModified:
			w.Header().Set("ETag", cond)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		c := &conform{ResponseWriter: w}
		s.handler.ServeHTTP(c, r)
		if !c.wrote {
			// A HEAD answered 200 writes nothing: its headers go out as
			// the handler returns, unless written here.
			c.WriteHeader(http.StatusOK)
		}
		return
	}
	s.handler.ServeHTTP(w, r)
}

// listV2 answers a ListObjectsV2 with its KeyCount always, as S3 does: the
// store leaves it out when it is 0, and a client that reads it (boto3's
// response["KeyCount"]) finds nothing where S3 says 0.
func listV2(next http.Handler, w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK && !bytes.Contains(body, []byte("<KeyCount>")) {
		if i := bytes.LastIndex(body, []byte("</ListBucketResult>")); i >= 0 {
			body = append(body[:i:i], append([]byte("<KeyCount>0</KeyCount>"), body[i:]...)...)
		}
	}
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// Close releases the store.
func (s *Server) Close() error { return s.closer() }
