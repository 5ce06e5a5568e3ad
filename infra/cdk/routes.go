package main

import "github.com/shopstream/shopstream/infra/cdk/stack"

// declaredRoutes are the HTTP API's routes from shared/routes.
func declaredRoutes() []stack.Route { return nil }
