package s3server

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
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

	stripes [64]sync.Mutex

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
// on: a write of an object replaces its tags (with its header's, a copy's
// source's, or none), a deletion drops them, and a read says how many it
// has (x-amz-tagging-count).
func (t *tagging) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key := splitPath(r.URL.Path)
	q := r.URL.Query()
	switch {
	case key == "" && r.Method == http.MethodPost && q.Has("delete"):
		t.deleteObjects(w, r, bucket)
		return
	case key == "" && r.Method == http.MethodDelete && onlyID(q):
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		t.next.ServeHTTP(sw, r)
		if sw.status < 300 {
			_ = t.dropBucket(bucket)
		}
		return
	case key == "":
		t.next.ServeHTTP(w, r)
		return
	case q.Has("tagging"):
		if q.Has("versionId") {
			writeS3Error(w, http.StatusNotImplemented, "NotImplemented", "The local S3 keeps tags of an object's current version only.", r.URL.Path)
			return
		}
		lock := t.lock(bucket, key)
		lock.Lock()
		defer lock.Unlock()
		t.serveTagging(w, r, bucket, key)
		return
	case r.Method == http.MethodPost && q.Has("uploads") && r.Header.Get("X-Amz-Tagging") != "":
		writeS3Error(w, http.StatusNotImplemented, "NotImplemented", "The local S3 does not keep the tags of a multipart upload; tag the object once it is complete.", r.URL.Path)
		return
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && !q.Has("uploadId"):
		if set, err := t.get(bucket, key); err == nil && len(set) > 0 && !q.Has("versionId") {
			w.Header().Set("X-Amz-Tagging-Count", strconv.Itoa(len(set)))
		}
		t.next.ServeHTTP(w, r)
		return
	}
	// Writes of the object itself: PutObject and CopyObject, DeleteObject of
	// the current version, CompleteMultipartUpload. Subresources (?acl,
	// ?uploadId parts and aborts, ?versionId) leave the tags alone.
	writes := (r.Method == http.MethodPut || r.Method == http.MethodDelete) && onlyID(q) ||
		r.Method == http.MethodPost && q.Has("uploadId")
	if !writes {
		t.next.ServeHTTP(w, r)
		return
	}
	lock := t.lock(bucket, key)
	lock.Lock()
	defer lock.Unlock()
	var set map[string]string
	if h := r.Header.Get("X-Amz-Tagging"); h != "" && r.Method == http.MethodPut {
		var err error
		if set, err = parseTagHeader(h); err != nil {
			writeS3Error(w, http.StatusBadRequest, "InvalidTag", err.Error(), r.URL.Path)
			return
		}
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
	if sw.status < 300 {
		_ = t.put(bucket, key, set) // only a failing disk refuses; the tags are then the old ones
	}
}

// onlyID says whether a request's query holds nothing but the SDK's
// operation name (x-id): no subresource.
func onlyID(q url.Values) bool {
	for k := range q {
		if k != "x-id" {
			return false
		}
	}
	return true
}

// deleteObjects passes a DeleteObjects request on and drops the tags of the
// keys it names once it succeeded.
func (t *tagging) deleteObjects(w http.ResponseWriter, r *http.Request, bucket string) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		writeS3Error(w, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema", r.URL.Path)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var doc struct {
		Objects []struct {
			Key string `xml:"Key"`
		} `xml:"Object"`
	}
	_ = xml.Unmarshal(raw, &doc) // the engine answers a malformed body
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	t.next.ServeHTTP(sw, r)
	if sw.status >= 300 {
		return
	}
	for _, o := range doc.Objects {
		// A key the engine could not delete still exists and keeps its
		// tags. Under the key's stripe, so that a write of it in between
		// keeps the tags it brought.
		lock := t.lock(bucket, o.Key)
		lock.Lock()
		if _, err := t.backend.HeadObject(bucket, o.Key); err != nil {
			_ = t.put(bucket, o.Key, nil)
		}
		lock.Unlock()
	}
}

// lock is the stripe of bucket/key: a write and its tags, or a tagging
// call, run alone on a key.
func (t *tagging) lock(bucket, key string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tagID(bucket, key)))
	return &t.stripes[h.Sum32()%uint32(len(t.stripes))]
}

// dropBucket removes the tags of every object of a deleted bucket.
func (t *tagging) dropBucket(bucket string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	prefix := tagID(bucket, "")
	if t.db == nil {
		for id := range t.mem {
			if strings.HasPrefix(id, prefix) {
				delete(t.mem, id)
			}
		}
		return nil
	}
	return t.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(tagsBucket).Cursor()
		for k, _ := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, _ = c.Seek([]byte(prefix)) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
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
