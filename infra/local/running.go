package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// about is what a running stack says of itself at GET /_local/stack on its
// DynamoDB endpoint.
type about struct {
	Pid      int    `json:"pid"`
	API      string `json:"api"`
	DynamoDB string `json:"dynamodb"`
	S3       string `json:"s3"`
	Search   string `json:"search"`
	OTLP     string `json:"otlp,omitempty"`
	DataDir  string `json:"dataDir,omitempty"`
}

func (a about) String() string {
	s := fmt.Sprintf("pid %d: API %s, DynamoDB %s, S3 %s, search %s", a.Pid, a.API, a.DynamoDB, a.S3, a.Search)
	if a.DataDir != "" {
		s += ", DATA_DIR " + a.DataDir
	}
	return s
}

// errAlreadyRunning is returned by checkPorts when a local stack holds one of
// the ports this one would listen on.
var errAlreadyRunning = errors.New("a local stack is already running")

// checkPorts says, before anything starts, whether the ports this stack
// would listen on are taken: by a local stack (which one, and how to stop
// it), or by another program (which port, and which setting moves it).
func checkPorts(ctx context.Context, cfg settings) error {
	var busy []string
	for _, p := range []struct {
		env  string
		port int
	}{{"API_PORT", cfg.APIPort}, {"DYNAMODB_PORT", cfg.DynamoDBPort}, {"S3_PORT", cfg.S3Port}, {"SEARCH_PORT", cfg.SearchPort}, {"OTLP_PORT", cfg.OTLPPort}} {
		if p.port == 0 {
			continue
		}
		l, err := net.Listen("tcp", addr(p.port))
		if err == nil {
			l.Close()
			continue
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%s=%d: %w", p.env, p.port, err)
		}
		busy = append(busy, fmt.Sprintf("%d (%s)", p.port, p.env))
	}
	if len(busy) == 0 {
		return nil
	}
	if a, ok := askStack(ctx, cfg.DynamoDBPort); ok {
		return fmt.Errorf("%w (%s); stop it with kill %d (or Ctrl-C where it runs), or give this one other ports: API_PORT, DYNAMODB_PORT, S3_PORT, SEARCH_PORT, OTLP_PORT",
			errAlreadyRunning, a, a.Pid)
	}
	return fmt.Errorf("port %s in use by another program; stop it or choose another port", strings.Join(busy, ", "))
}

// askStack asks whoever listens on the DynamoDB port whether it is a local
// stack, and which.
func askStack(ctx context.Context, port int) (about, bool) {
	if port == 0 {
		return about{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr(port)+"/_local/stack", nil)
	if err != nil {
		return about{}, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return about{}, false
	}
	defer resp.Body.Close()
	var a about
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&a) != nil || a.Pid == 0 {
		return about{}, false
	}
	return a, true
}
