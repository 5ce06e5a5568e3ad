package system

import (
	"context"
	"net/http"

	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/esm"
	"github.com/shopstream/shopstream/infra/streamfunctions"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/tracing"
	"github.com/shopstream/shopstream/shared/wiring"
)

// gateway puts the API Gateway emulation in front of the API function.
func gateway(h apigw.Invoker, cfg Config) http.Handler {
	var throttle *routes.Throttle
	if !cfg.NoAPIThrottle {
		t := cfg.APIThrottle
		if t.Rate <= 0 {
			t.Rate = routes.ProdThrottle.Rate
		}
		if t.Burst <= 0 {
			t.Burst = routes.ProdThrottle.Burst
		}
		throttle = &t
	}
	return apigw.New(apigw.Config{Handler: h, Secret: cfg.JWTSecret, Routes: routes.All(), Throttle: throttle,
		Logger: cfg.Logger.With("service", "apigateway")})
}

// FunctionDeps are the stream functions' collaborators besides their
// environment.
type FunctionDeps = streamfunctions.Deps

// StreamFunctions builds the stream functions, by name, from the environment
// they read on AWS, as the local event-source mappings invoke them.
func StreamFunctions(getenv func(string) string, d FunctionDeps) (map[string]esm.Invoker, error) {
	fns, err := streamfunctions.Build(getenv, d)
	if err != nil {
		return nil, err
	}
	out := make(map[string]esm.Invoker, len(fns))
	for name, fn := range fns {
		out[name] = fn
	}
	return out, nil
}

// processors builds the stream functions from the same environment they read
// on AWS and starts the event-source mappings of shared/wiring.
func (s *System) processors(ctx context.Context, getenv func(string) string, cfg Config) error {
	functions, err := StreamFunctions(getenv, FunctionDeps{DynamoDB: s.DynamoDB(), S3: s.S3(), Logger: cfg.Logger,
		Metrics: cfg.Metrics, Tracing: func(fn string) *tracing.Tracing { return s.Tracing[fn] }})
	if err != nil {
		return err
	}
	s.Functions = functions
	if cfg.NoMappings {
		return nil
	}
	dataDir := ""
	if cfg.Stack.DataDir != "" {
		dataDir = cfg.Stack.DataDir + "/lambda"
	}
	mappings := cfg.Mappings
	if mappings == nil {
		mappings = wiring.Mappings()
	}
	dup := cfg.DuplicateEvery
	switch {
	case dup == 0:
		dup = DefaultDuplicateEvery
	case dup < 0:
		dup = 0
	}
	partitions := cfg.StreamPartitions
	if partitions <= 0 {
		partitions = DefaultStreamPartitions
	}
	reserved := cfg.ReservedConcurrency
	if reserved == nil {
		reserved = wiring.ProdReservedConcurrency()
	}
	poller, err := esm.Start(ctx, esm.Config{Reserved: reserved,
		DynamoDB: s.DynamoDB(), Streams: s.Streams(), TablePrefix: cfg.TablePrefix,
		Mappings: mappings, Functions: functions, PollInterval: cfg.PollInterval,
		DataDir: dataDir, DuplicateEvery: dup, Partitions: partitions, Logger: cfg.Logger.With("service", "event-source-mapping"),
		Destination: &esm.S3Destination{S3: s.S3(), Bucket: s.FailureBucket},
	})
	if err != nil {
		return err
	}
	s.Poller = poller
	s.closers = append(s.closers, poller.Close)
	return nil
}
