// Command local runs the whole of shopstream on one machine: the local AWS
// endpoints (DynamoDB with Streams and TTL, S3, search), the tables and the
// archive bucket. Ports and settings come from the environment (CONTRACT §1).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/shopstream/shopstream/infra/local/stack"
	"github.com/shopstream/shopstream/shared/tables"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(os.Getenv("LOG_LEVEL"))}))
	if err := run(ctx, os.Getenv, logger); err != nil {
		logger.Error("local stack", "err", err.Error())
		os.Exit(1)
	}
}

func logLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// settings are the environment's knobs, with the contract's defaults.
type settings struct {
	DynamoDBPort, S3Port, SearchPort, APIPort int
	DataDir                                   string
	SweepInterval                             time.Duration
	ArchiveBucket                             string
	TablePrefix                               string
}

func load(getenv func(string) string) (settings, error) {
	s := settings{
		DataDir:       getenv("DATA_DIR"),
		ArchiveBucket: or(getenv("ARCHIVE_BUCKET"), "shopstream-archive"),
		TablePrefix:   getenv("TABLE_PREFIX"),
	}
	ports := []struct {
		env  string
		def  int
		dest *int
	}{
		{"DYNAMODB_PORT", 8000, &s.DynamoDBPort},
		{"S3_PORT", 9000, &s.S3Port},
		{"SEARCH_PORT", 9200, &s.SearchPort},
		{"API_PORT", 3000, &s.APIPort},
	}
	for _, p := range ports {
		*p.dest = p.def
		if v := getenv(p.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 65535 {
				return s, fmt.Errorf("%s=%q: want a port number", p.env, v)
			}
			*p.dest = n
		}
	}
	s.SweepInterval = 5 * time.Second
	if v := getenv("TTL_SWEEP_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("TTL_SWEEP_INTERVAL=%q: want a positive Go duration such as 5s", v)
		}
		s.SweepInterval = d
	}
	return s, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func run(ctx context.Context, getenv func(string) string, logger *slog.Logger) error {
	cfg, err := load(getenv)
	if err != nil {
		return err
	}
	started := time.Now()
	st, err := stack.Start(ctx, stack.Config{
		DynamoDBAddr:     addr(cfg.DynamoDBPort),
		S3Addr:           addr(cfg.S3Port),
		SearchAddr:       addr(cfg.SearchPort),
		DataDir:          cfg.DataDir,
		TTLSweepInterval: cfg.SweepInterval,
		Buckets:          []string{cfg.ArchiveBucket},
		Logger:           logger,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Error("stop", "err", err.Error())
		}
	}()
	if err := tables.Create(ctx, st.DynamoDB(), cfg.TablePrefix); err != nil {
		return err
	}
	logger.Info("endpoint", "service", "dynamodb", "url", st.DynamoDBURL, "dynamodbLocalPid", st.DynamoDBLocalPid())
	logger.Info("endpoint", "service", "s3", "url", st.S3URL, "bucket", cfg.ArchiveBucket)
	logger.Info("endpoint", "service", "search", "url", st.SearchURL)
	logger.Info("ready", "ms", time.Since(started).Milliseconds(), "pid", os.Getpid())
	<-ctx.Done()
	logger.Info("stopping")
	return nil
}
