package s3server

import (
	"encoding/json"
	"net/http"
	"sync"
)

// Fault makes the S3 service answer matching requests with an S3 error
// instead of serving them, as S3 does under a burst (503 SlowDown) or a
// failure of its own (500 InternalError, 503 ServiceUnavailable): the
// errors the archiver, the replay and the audit must ride out.
type Fault struct {
	// Bucket limits the fault to one bucket; "" matches any.
	Bucket string `json:"bucket,omitempty"`
	// Operation limits it to PutObject, GetObject, HeadObject, DeleteObject
	// or ListObjectsV2; "" matches any.
	Operation string `json:"operation,omitempty"`
	// Code is SlowDown, InternalError or ServiceUnavailable.
	Code string `json:"code"`
	// Times is how many requests fail; 0 means until the fault is removed.
	Times int `json:"times,omitempty"`
}

// faultOperations are the operations a fault can name ("" for any).
var faultOperations = map[string]bool{"": true, "PutObject": true, "GetObject": true, "HeadObject": true, "DeleteObject": true, "CopyObject": true, "ListObjectsV2": true}

var faultStatus = map[string]int{"SlowDown": http.StatusServiceUnavailable, "ServiceUnavailable": http.StatusServiceUnavailable, "InternalError": http.StatusInternalServerError}

var faultMessage = map[string]string{
	"SlowDown":           "Please reduce your request rate.",
	"ServiceUnavailable": "Service is unable to handle request.",
	"InternalError":      "We encountered an internal error. Please try again.",
}

// faulting serves the fault hook (POST /_local/faults with a Fault, GET for
// those still in force, DELETE to clear them all) and answers the requests a
// fault matches.
type faulting struct {
	next http.Handler

	mu      sync.Mutex
	entries []*faultEntry
}

type faultEntry struct {
	Fault
	left int
}

// FaultsPath is where the hook listens: not a bucket name S3 allows.
const FaultsPath = "/_local/faults"

func (f *faulting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == FaultsPath {
		f.hook(w, r)
		return
	}
	bucket, key := splitPath(r.URL.Path)
	if fault, ok := f.match(bucket, operation(r, key)); ok {
		writeS3Error(w, faultStatus[fault.Code], fault.Code, faultMessage[fault.Code], r.URL.Path)
		return
	}
	f.next.ServeHTTP(w, r)
}

func (f *faulting) hook(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		var fault Fault
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&fault); err != nil || faultStatus[fault.Code] == 0 ||
			!faultOperations[fault.Operation] || fault.Times < 0 {
			http.Error(w, `{"message":"body must be a fault whose code is SlowDown, InternalError or ServiceUnavailable, whose operation is empty or one of PutObject, GetObject, HeadObject, DeleteObject, CopyObject, ListObjectsV2, and whose times is 0 (until cleared) or more"}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.entries = append(f.entries, &faultEntry{Fault: fault, left: fault.Times})
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		// The faults still in force, Times holding what is left.
		f.mu.Lock()
		active := make([]Fault, 0, len(f.entries))
		for _, e := range f.entries {
			x := e.Fault
			if x.Times > 0 {
				x.Times = e.left
			}
			active = append(active, x)
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(active)
	case http.MethodDelete:
		f.mu.Lock()
		f.entries = nil
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (f *faulting) match(bucket, op string) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, e := range f.entries {
		if e.Bucket != "" && e.Bucket != bucket || e.Operation != "" && e.Operation != op {
			continue
		}
		if e.Times > 0 {
			if e.left--; e.left <= 0 {
				f.entries = append(f.entries[:i], f.entries[i+1:]...)
			}
		}
		return e.Fault, true
	}
	return Fault{}, false
}

// operation names the S3 API a path-style request calls, for the ones a
// fault can name; "" for the others.
func operation(r *http.Request, key string) string {
	q := r.URL.Query()
	if key == "" {
		if r.Method == http.MethodGet && q.Get("list-type") == "2" {
			return "ListObjectsV2"
		}
		return ""
	}
	if !onlyID(q) {
		return ""
	}
	switch r.Method {
	case http.MethodPut:
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			return "CopyObject"
		}
		return "PutObject"
	case http.MethodGet:
		return "GetObject"
	case http.MethodHead:
		return "HeadObject"
	case http.MethodDelete:
		return "DeleteObject"
	}
	return ""
}
