package search

import (
	"encoding/json"
	"net/http"
	"sync"
)

// FaultsPath is the fault hook: POST {"rejectBulkItems": n} makes the next n
// actions of _bulk requests answer 429 rejected_execution_exception, as a
// domain whose write queue is full answers them (the other actions of the
// request are applied); {"rejectBulkRequests": n} makes the next n _bulk
// requests answer 429 whole, nothing applied, as a node that refuses the
// request does; GET says how many are left, DELETE clears.
const FaultsPath = "/_local/faults"

type faults struct {
	mu       sync.Mutex
	rejected int // bulk actions
	requests int // whole bulk requests
}

// takeRequestRejection reports whether the next bulk request is refused whole.
func (f *faults) takeRequestRejection() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.requests <= 0 {
		return false
	}
	f.requests--
	return true
}

// takeRejection reports whether the next bulk action is to be rejected.
func (f *faults) takeRejection() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rejected <= 0 {
		return false
	}
	f.rejected--
	return true
}

func (f *faults) hook(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodPost:
		var body struct {
			RejectBulkItems    int `json:"rejectBulkItems"`
			RejectBulkRequests int `json:"rejectBulkRequests"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil ||
			body.RejectBulkItems < 0 || body.RejectBulkRequests < 0 || body.RejectBulkItems+body.RejectBulkRequests == 0 {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"message":"body must be {\"rejectBulkItems\": n} or {\"rejectBulkRequests\": n}, n > 0"}`))
			return
		}
		f.mu.Lock()
		f.rejected += body.RejectBulkItems
		f.requests += body.RejectBulkRequests
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		f.mu.Lock()
		left := map[string]int{"rejectBulkItems": f.rejected, "rejectBulkRequests": f.requests}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(left)
	case http.MethodDelete:
		f.mu.Lock()
		f.rejected, f.requests = 0, 0
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// rejection is the answer to a rejected bulk action.
func rejection() *apiError {
	return &apiError{status: http.StatusTooManyRequests, typ: "rejected_execution_exception",
		reason: "rejected execution of primary operation on OpenSearchThreadPoolExecutor[name = local/write, queue capacity = 10000]"}
}
