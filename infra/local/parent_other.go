//go:build !linux

package main

import "context"

// watchMake needs /proc to see make's signal handlers; elsewhere `make run`
// stops on SIGTERM to make, which make passes on, and on Ctrl-C.
func watchMake(ctx context.Context, stop func(reason string)) {}
