package routes

// Throttle is a stage's default route throttling on API Gateway: each route
// has its own token bucket, which holds Burst requests and refills at Rate
// requests a second; a request that finds it empty is answered 429 by the
// gateway, and the function never runs. The deployed stages set it
// (infra/cdk) and the local stack's gateway applies it.
type Throttle struct {
	Rate, Burst int
}

// The stages' throttling: dev's keeps a stray load test cheap; prod's is
// what the shop's clients meet, and the local stack's default.
var (
	DevThrottle  = Throttle{Rate: 50, Burst: 100}
	ProdThrottle = Throttle{Rate: 1000, Burst: 2000}
)
