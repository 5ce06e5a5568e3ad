package s3server

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/johannesboyne/gofakes3"
	bolt "go.etcd.io/bbolt"
)

// S3's limits on object tags ("Categorizing your storage using tags", Amazon
// S3 user guide): at most 10 tags an object, a key of at most 128 Unicode
// characters, a value of at most 256, keys unique, none starting "aws:".
const (
	maxTags        = 10
	maxTagKeyLen   = 128
	maxTagValueLen = 256
	maxTaggingBody = 64 << 10
)

// tagging serves the object tagging API (GetObjectTagging,
// PutObjectTagging, DeleteObjectTagging), which the S3 engine underneath
// does not: it would store a PUT ?tagging body as the object itself. Tags
// live beside the objects, keyed by bucket and key, and go when the object
// is written again or deleted, as on S3 (a PutObject replaces the tag set
// with its x-amz-tagging header's, or none).
type tagging struct {
	backend gofakes3.Backend
	next    http.Handler

	mu  sync.Mutex
	mem map[string]map[string]string // dir == "": in memory
	db  *bolt.DB
}

var tagsBucket = []byte("tags")

func newTagging(dir string, backend gofakes3.Backend, next http.Handler) (*tagging, error) {
	t := &tagging{backend: backend, next: next, mem: map[string]map[string]string{}}
	if dir == "" {
		return t, nil
	}
	db, err := bolt.Open(filepath.Join(dir, "s3-tags.bolt"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open s3 tag store: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(tagsBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("open s3 tag store: %w", err)
	}
	t.db = db
	return t, nil
}

func (t *tagging) close() error {
	if t.db == nil {
		return nil
	}
	return t.db.Close()
}

// ServeHTTP answers ?tagging on an object itself and passes everything else
// on, dropping the tags of an object written or deleted.
func (t *tagging) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key := splitPath(r.URL.Path)
	q := r.URL.Query()
	if key == "" {
		t.next.ServeHTTP(w, r)
		return
	}
	if q.Has("tagging") {
		t.serveTagging(w, r, bucket, key)
		return
	}
	writes := (r.Method == http.MethodPut && !q.Has("uploadId")) || r.Method == http.MethodDelete ||
		(r.Method == http.MethodPost && q.Has("uploadId"))
	if !writes {
		t.next.ServeHTTP(w, r)
		return
	}
	var set map[string]string
	if h := r.Header.Get("X-Amz-Tagging"); h != "" && r.Method == http.MethodPut {
		var err error
		if set, err = parseTagHeader(h); err != nil {
			writeS3Error(w, http.StatusBadRequest, "InvalidTag", err.Error(), r.URL.Path)
			return
		}
	}
	// The write drops the object's tags; the ones its header gives are set
	// once it is written.
	if err := t.put(bucket, key, nil); err != nil {
		writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error(), r.URL.Path)
		return
	}
	if src := r.Header.Get("X-Amz-Copy-Source"); src != "" && r.Method == http.MethodPut &&
		!strings.EqualFold(r.Header.Get("X-Amz-Tagging-Directive"), "REPLACE") {
		// CopyObject copies the source's tags unless told to replace them.
		path, _, _ := strings.Cut(src, "?")
		if p, err := url.PathUnescape(path); err == nil {
			path = p
		}
		sb, sk := splitPath("/" + strings.TrimPrefix(path, "/"))
		from, err := t.get(sb, sk)
		if err != nil {
			writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error(), r.URL.Path)
			return
		}
		set = from
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	t.next.ServeHTTP(sw, r)
	if sw.status < 300 && len(set) > 0 {
		_ = t.put(bucket, key, set) // only a failing disk refuses; GetObjectTagging then shows none
	}
}

func (t *tagging) serveTagging(w http.ResponseWriter, r *http.Request, bucket, key string) {
	if ok, err := t.backend.BucketExists(bucket); err != nil || !ok {
		writeS3Error(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist", "/"+bucket)
		return
	}
	if _, err := t.backend.HeadObject(bucket, key); err != nil {
		writeS3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.", r.URL.Path)
		return
	}
	switch r.Method {
	case http.MethodGet:
		set, err := t.get(bucket, key)
		if err != nil {
			writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error(), r.URL.Path)
			return
		}
		var doc taggingDoc
		doc.XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
		for k, v := range set {
			doc.TagSet = append(doc.TagSet, tagDoc{Key: k, Value: v})
		}
		body, _ := xml.Marshal(doc)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append([]byte(xml.Header), body...))
	case http.MethodPut:
		raw, err := io.ReadAll(io.LimitReader(r.Body, maxTaggingBody+1))
		if err != nil || len(raw) > maxTaggingBody {
			writeS3Error(w, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema", r.URL.Path)
			return
		}
		var doc taggingDoc
		if err := xml.Unmarshal(raw, &doc); err != nil || doc.XMLName.Local != "Tagging" {
			writeS3Error(w, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema", r.URL.Path)
			return
		}
		set, err := tagSet(doc.TagSet)
		if err != nil {
			writeS3Error(w, http.StatusBadRequest, "InvalidTag", err.Error(), r.URL.Path)
			return
		}
		if err := t.put(bucket, key, set); err != nil {
			writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error(), r.URL.Path)
			return
		}
		w.WriteHeader(http.StatusOK)
	case http.MethodDelete:
		if err := t.put(bucket, key, nil); err != nil {
			writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error(), r.URL.Path)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeS3Error(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.", r.URL.Path)
	}
}

type taggingDoc struct {
	XMLName xml.Name `xml:"Tagging"`
	XMLNS   string   `xml:"xmlns,attr,omitempty"`
	TagSet  []tagDoc `xml:"TagSet>Tag"`
}

type tagDoc struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// tagSet checks a tag set against S3's limits.
func tagSet(tags []tagDoc) (map[string]string, error) {
	if len(tags) > maxTags {
		return nil, fmt.Errorf("Object tags cannot be greater than %d", maxTags)
	}
	set := map[string]string{}
	for _, tag := range tags {
		switch {
		case tag.Key == "" || utf8.RuneCountInString(tag.Key) > maxTagKeyLen:
			return nil, fmt.Errorf("The TagKey you have provided is invalid")
		case utf8.RuneCountInString(tag.Value) > maxTagValueLen:
			return nil, fmt.Errorf("The TagValue you have provided is invalid")
		case strings.HasPrefix(strings.ToLower(tag.Key), "aws:"):
			return nil, fmt.Errorf("Your TagKey cannot be prefixed with aws:")
		}
		if _, dup := set[tag.Key]; dup {
			return nil, fmt.Errorf("Cannot provide multiple Tags with the same key")
		}
		set[tag.Key] = tag.Value
	}
	return set, nil
}

// parseTagHeader reads a PutObject's x-amz-tagging header (URL query
// encoding: k1=v1&k2=v2).
func parseTagHeader(h string) (map[string]string, error) {
	vals, err := url.ParseQuery(h)
	if err != nil {
		return nil, errors.New("The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.")
	}
	var tags []tagDoc
	for k, vs := range vals {
		if len(vs) != 1 {
			return nil, errors.New("Cannot provide multiple Tags with the same key")
		}
		tags = append(tags, tagDoc{Key: k, Value: vs[0]})
	}
	return tagSet(tags)
}

func tagID(bucket, key string) string { return bucket + "/" + key }

// get returns the tags of bucket/key.
func (t *tagging) get(bucket, key string) (map[string]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.db == nil {
		return t.mem[tagID(bucket, key)], nil
	}
	var set map[string]string
	err := t.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(tagsBucket).Get([]byte(tagID(bucket, key)))
		if raw == nil {
			return nil
		}
		return json.Unmarshal(raw, &set)
	})
	return set, err
}

// put replaces the tags of bucket/key; an empty set removes them.
func (t *tagging) put(bucket, key string, set map[string]string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := tagID(bucket, key)
	if t.db == nil {
		if len(set) == 0 {
			delete(t.mem, id)
		} else {
			t.mem[id] = set
		}
		return nil
	}
	return t.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(tagsBucket)
		if len(set) == 0 {
			return b.Delete([]byte(id))
		}
		raw, err := json.Marshal(set)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), raw)
	})
}

// splitPath reads a path-style request's bucket and key (the path is
// already unescaped).
func splitPath(p string) (bucket, key string) {
	p = strings.TrimPrefix(p, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// writeS3Error answers an S3 error document.
func writeS3Error(w http.ResponseWriter, status int, code, msg, resource string) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	_ = xml.NewEncoder(&b).Encode(struct {
		XMLName  xml.Name `xml:"Error"`
		Code     string   `xml:"Code"`
		Message  string   `xml:"Message"`
		Resource string   `xml:"Resource"`
	}{Code: code, Message: msg, Resource: resource})
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
