package ddbfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ttlSettings holds each table's TTL attribute. The front answers
// UpdateTimeToLive and DescribeTimeToLive itself and never tells DynamoDB Local:
// DynamoDB Local 3.x expires items on its own, slowly (about 20 items per
// pass), on a schedule of its own, with stream records whose eventName no SDK
// knows. Keeping the setting here leaves expiry to the sweeper alone.
type ttlSettings struct {
	mu    sync.Mutex
	attrs map[string]string // table -> attribute
	path  string
}

func openTTLSettings(dir string) (*ttlSettings, error) {
	s := &ttlSettings{attrs: map[string]string{}}
	if dir == "" {
		return s, nil
	}
	s.path = filepath.Join(dir, "ttl-settings.json")
	b, err := os.ReadFile(s.path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ttl settings: %w", err)
	}
	if err := json.Unmarshal(b, &s.attrs); err != nil {
		return nil, fmt.Errorf("decode ttl settings %s: %w", s.path, err)
	}
	return s, nil
}

// saveLocked writes the settings atomically; the caller holds mu.
func (s *ttlSettings) saveLocked() error {
	if s.path == "" {
		return nil
	}
	b, err := json.Marshal(s.attrs)
	if err != nil {
		return fmt.Errorf("encode ttl settings: %w", err)
	}
	tmp := s.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write ttl settings: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write ttl settings: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync ttl settings: %w", err)
	}
	f.Close()
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("write ttl settings: %w", err)
	}
	return nil
}

func (s *ttlSettings) get(table string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.attrs[table]
	return a, ok
}

func (s *ttlSettings) forget(table string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.attrs[table]; !ok {
		return nil
	}
	delete(s.attrs, table)
	return s.saveLocked()
}

type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func validation(msg string) *apiError {
	return &apiError{http.StatusBadRequest, "com.amazon.coral.validate#ValidationException", msg}
}

// tableExists asks DynamoDB Local whether the table exists.
func (f *Front) tableExists(ctx context.Context, table string) error {
	_, err := f.cfg.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return &apiError{http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException",
			"Requested resource not found: Table: " + table + " not found"}
	}
	if err != nil {
		return &apiError{http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", err.Error()}
	}
	return nil
}

func (f *Front) updateTimeToLive(ctx context.Context, body []byte) (any, error) {
	var in struct {
		TableName               string
		TimeToLiveSpecification *struct {
			AttributeName string
			Enabled       *bool
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &apiError{http.StatusBadRequest, "com.amazon.coral.service#SerializationException", err.Error()}
	}
	spec := in.TimeToLiveSpecification
	switch {
	case len(in.TableName) < 3 || len(in.TableName) > 255:
		return nil, validation("1 validation error detected: Value at 'tableName' failed to satisfy constraint: Member must have length between 3 and 255")
	case spec == nil || spec.Enabled == nil:
		return nil, validation("1 validation error detected: Value null at 'timeToLiveSpecification' failed to satisfy constraint: Member must not be null")
	case spec.AttributeName == "" || len(spec.AttributeName) > 255:
		return nil, validation("1 validation error detected: Value at 'timeToLiveSpecification.attributeName' failed to satisfy constraint: Member must have length between 1 and 255")
	}
	if err := f.tableExists(ctx, in.TableName); err != nil {
		return nil, err
	}
	s := f.ttl
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, enabled := s.attrs[in.TableName]
	switch {
	case *spec.Enabled && enabled:
		return nil, validation("TimeToLive is already enabled")
	case !*spec.Enabled && !enabled:
		return nil, validation("TimeToLive is already disabled")
	case !*spec.Enabled && cur != spec.AttributeName:
		return nil, validation("TimeToLive attribute name does not match the current attribute name")
	case *spec.Enabled:
		s.attrs[in.TableName] = spec.AttributeName
	default:
		delete(s.attrs, in.TableName)
	}
	if err := s.saveLocked(); err != nil {
		return nil, &apiError{http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", err.Error()}
	}
	return map[string]any{"TimeToLiveSpecification": map[string]any{"AttributeName": spec.AttributeName, "Enabled": *spec.Enabled}}, nil
}

func (f *Front) describeTimeToLive(ctx context.Context, body []byte) (any, error) {
	var in struct{ TableName string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &apiError{http.StatusBadRequest, "com.amazon.coral.service#SerializationException", err.Error()}
	}
	if err := f.tableExists(ctx, in.TableName); err != nil {
		return nil, err
	}
	if attr, ok := f.ttl.get(in.TableName); ok {
		return map[string]any{"TimeToLiveDescription": map[string]any{"TimeToLiveStatus": "ENABLED", "AttributeName": attr}}, nil
	}
	return map[string]any{"TimeToLiveDescription": map[string]any{"TimeToLiveStatus": "DISABLED"}}, nil
}
