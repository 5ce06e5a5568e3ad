package ddbfront

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Fault makes the front answer matching requests with an AWS-shaped error
// instead of passing them on, as DynamoDB does under throttling or failure.
type Fault struct {
	// Table limits the fault to requests touching this physical table; "" matches any.
	Table string `json:"table,omitempty"`
	// Operation limits the fault to one API, e.g. "UpdateItem" or "GetRecords"; "" matches any.
	Operation string `json:"operation,omitempty"`
	// Code is the error: ProvisionedThroughputExceededException,
	// ThrottlingException, RequestLimitExceeded or InternalServerError; or
	// TransactionConflict, which cancels a TransactWriteItems or
	// TransactGetItems as a concurrent transaction on its items does: a
	// TransactionCanceledException whose reasons name TransactionConflict for
	// the actions on Table (all when Table is "") and None for the others;
	// and fails a PutItem, UpdateItem or DeleteItem with
	// TransactionConflictException, as AWS fails a single-item write to an
	// item a transaction holds.
	Code string `json:"code"`
	// Times is how many requests fail; 0 means until the fault is removed.
	Times int `json:"times,omitempty"`
}

func (f Fault) status() int {
	if f.Code == "InternalServerError" {
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

func (f Fault) typeName() string { return "com.amazonaws.dynamodb.v20120810#" + f.Code }

// conflict is the Code of a fault that cancels transactions by contention.
const conflict = "TransactionConflict"

// applies reports whether the fault can answer operation op: a conflict
// only answers transactions and single-item writes.
func (f Fault) applies(op string) bool {
	if f.Operation != "" && f.Operation != op {
		return false
	}
	return f.Code != conflict || op == "TransactWriteItems" || op == "TransactGetItems" || singleWrites[op]
}

// singleWrites are the single-item writes, which a transaction holding
// their item fails with TransactionConflictException.
var singleWrites = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true}

// cancellation is the body of the TransactionCanceledException a conflict
// fault answers to a transaction of the actions on tables (one per action).
func (f Fault) cancellation(tables []string) map[string]any {
	reasons := make([]map[string]string, len(tables))
	codes := make([]string, len(tables))
	for i, table := range tables {
		if f.Table == "" || table == f.Table {
			reasons[i] = map[string]string{"Code": conflict, "Message": "Transaction is ongoing for the item"}
		} else {
			reasons[i] = map[string]string{"Code": "None"}
		}
		codes[i] = reasons[i]["Code"]
	}
	return map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	}
}

func (f Fault) message() string {
	switch f.Code {
	case "ProvisionedThroughputExceededException":
		return "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."
	case "ThrottlingException":
		return "Rate of requests exceeds the allowed throughput."
	case "InternalServerError":
		return "Internal server error"
	default:
		return f.Code
	}
}

type faultEntry struct {
	Fault
	left int
}

type faults struct {
	mu      sync.Mutex
	entries []*faultEntry
}

func (fs *faults) add(f Fault) func() {
	e := &faultEntry{Fault: f, left: f.Times}
	fs.mu.Lock()
	fs.entries = append(fs.entries, e)
	fs.mu.Unlock()
	return func() {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		for i, x := range fs.entries {
			if x == e {
				fs.entries = append(fs.entries[:i], fs.entries[i+1:]...)
				return
			}
		}
	}
}

func (fs *faults) clear() {
	fs.mu.Lock()
	fs.entries = nil
	fs.mu.Unlock()
}

func (fs *faults) match(op string, tables []string) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, e := range fs.entries {
		if !e.applies(op) {
			continue
		}
		if e.Table != "" && !contains(tables, e.Table) {
			continue
		}
		if e.Times > 0 {
			e.left--
			if e.left <= 0 {
				fs.entries = append(fs.entries[:i], fs.entries[i+1:]...)
			}
		}
		return e.Fault, true
	}
	return Fault{}, false
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// InjectFault adds a fault and returns the function that removes it.
func (f *Front) InjectFault(fault Fault) (remove func()) { return f.faults.add(fault) }

// ActiveFaults returns the faults still in force, Times holding what is left.
func (f *Front) ActiveFaults() []Fault {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	out := make([]Fault, 0, len(f.faults.entries))
	for _, e := range f.faults.entries {
		x := e.Fault
		if x.Times > 0 {
			x.Times = e.left
		}
		out = append(out, x)
	}
	return out
}

// ClearFaults removes every fault.
func (f *Front) ClearFaults() { f.faults.clear() }

// FaultsHandler serves the fault hook over HTTP for drills run from another
// process: POST a Fault as JSON to add it, DELETE to clear all.
func (f *Front) FaultsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			var fault Fault
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&fault); err != nil || fault.Code == "" {
				http.Error(w, `{"message":"body must be a fault with a code"}`, http.StatusBadRequest)
				return
			}
			f.InjectFault(fault)
			w.WriteHeader(http.StatusNoContent)
		case http.MethodDelete:
			f.ClearFaults()
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Allow", "POST, DELETE")
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})
}
