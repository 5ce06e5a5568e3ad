package s3server

import (
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// conform answers an object's GET or HEAD with the headers S3 sends, where
// the store sends others:
//   - a checksum only on a 200: a part of an object (206) carries no
//     checksum of the whole, nor does a 304 or an error, and the SDKs that
//     validate checksums (by default) refuse or stumble on one there
//     (boto3's get_object of a matching If-None-Match raised a TypeError);
//   - no request header back: the store keeps every X-Amz- header of the
//     object's PUT as its metadata, and sent X-Amz-Date,
//     X-Amz-Content-Sha256 and the like with each read;
//   - user metadata by its lowercase name (x-amz-meta-m), as S3 keeps it:
//     Go writes headers in their canonical form, and boto3 read a key m
//     put as m back as M.
type conform struct {
	http.ResponseWriter
	wrote bool
}

// requestOnly are X-Amz- headers of a request that S3 never answers with.
var requestOnly = []string{
	"X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Decoded-Content-Length", "X-Amz-Trailer",
	"X-Amz-Sdk-Checksum-Algorithm", "X-Amz-Security-Token", "X-Amz-Acl", "X-Amz-Tagging",
	"X-Amz-Expected-Bucket-Owner", "X-Amz-Request-Payer", "X-Amz-User-Agent", "X-Amz-Checksum-Algorithm",
}

func (c *conform) WriteHeader(code int) {
	if !c.wrote {
		h := c.Header()
		for _, k := range requestOnly {
			h.Del(k)
		}
		for k, v := range h {
			switch {
			case strings.HasPrefix(k, "X-Amz-Checksum-") && code != http.StatusOK:
				delete(h, k)
			case strings.HasPrefix(k, "X-Amz-Meta-"):
				delete(h, k)
				h[strings.ToLower(k)] = v // written as it is: a lowercase name
			}
		}
	}
	c.wrote = true
	c.ResponseWriter.WriteHeader(code)
}

func (c *conform) Write(b []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

// conditions judges the conditions of an object's GET or HEAD as S3 does
// ("GetObject", Amazon S3 API Reference; RFC 9110, 13.2.2): If-Match whose
// ETag is not the object's, or, without If-Match, If-Unmodified-Since
// before its last change, is a 412 naming the condition; If-None-Match
// that matches (a listed ETag, or * for any object) is a 304, with the
// object's ETag, and one that does not match makes If-Modified-Since
// ignored (the store judged it regardless). 0 when the request goes on to
// the store, which also answers an object that is not there.
func (s *Server) conditions(bucket, key string, r *http.Request) (status int, cond string) {
	ifMatch, ifUnmodified, ifNoneMatch := r.Header.Get("If-Match"), r.Header.Get("If-Unmodified-Since"), r.Header.Get("If-None-Match")
	if ifMatch == "" && ifUnmodified == "" && ifNoneMatch == "" {
		return 0, ""
	}
	obj, err := s.backend.HeadObject(bucket, key)
	if err != nil || obj == nil {
		return 0, ""
	}
	if obj.Contents != nil {
		_ = obj.Contents.Close()
	}
	etag := hex.EncodeToString(obj.Hash)
	switch {
	case ifMatch != "":
		if !matches(ifMatch, etag) {
			return http.StatusPreconditionFailed, "If-Match"
		}
	case ifUnmodified != "":
		since, err := http.ParseTime(ifUnmodified)
		modified, merr := time.Parse(http.TimeFormat, obj.Metadata["Last-Modified"])
		if err == nil && merr == nil && modified.After(since) {
			return http.StatusPreconditionFailed, "If-Unmodified-Since"
		}
	}
	if ifNoneMatch != "" {
		if matches(ifNoneMatch, etag) {
			return http.StatusNotModified, `"` + etag + `"`
		}
		r.Header.Del("If-None-Match")
		r.Header.Del("If-Modified-Since")
	}
	return 0, ""
}

// matches says whether a list of ETags (If-Match, If-None-Match) names
// etag, or is *.
func matches(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || strings.Trim(t, `"`) == etag {
			return true
		}
	}
	return false
}

// preconditionFailed answers 412 as S3 does: an error document naming the
// condition, and no body to a HEAD.
func preconditionFailed(w http.ResponseWriter, r *http.Request, cond string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusPreconditionFailed)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><Condition>` + cond + `</Condition></Error>`))
}
