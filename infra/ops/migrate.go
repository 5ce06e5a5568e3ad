package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/migrations"
)

// migrateCommand runs `make migrate [DRY_RUN=1] [RATE=n]`: every data
// migration not yet done, in order, each item changed conditionally on its
// version, progress recorded after every page (so a killed run continues
// where it stopped) and shown every few seconds with its rate and ETA.
func migrateCommand(ctx context.Context, t *target.Target, args []string, e env) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(e.stdout)
	dryRun := fs.Bool("dry-run", false, "change nothing, record nothing: list each change a run would make")
	rate := fs.Float64("rate", 0, "items scanned per second at most (0: as fast as the table serves them)")
	page := fs.Int("page", 100, "items per scan page (progress is recorded after each)")
	workers := fs.Int("workers", 8, "items of a page changed at once")
	every := fs.Duration("progress", 2*time.Second, "how often progress is printed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	w := &lineWriter{out: e.stdout}
	var last time.Time
	cfg := migrations.Config{
		DB: t.DynamoDB(), Tables: t.Tables, Rate: *rate, PageSize: int32(*page), Workers: *workers, DryRun: *dryRun,
		Progress: func(p migrations.Progress) {
			if p.AlreadyDone {
				w.printf("migrate %s: done by an earlier run (%d items changed of %d scanned)\n", p.Migration, p.Changed, p.Scanned)
				return
			}
			if now := time.Now(); p.Done || now.Sub(last) >= *every {
				last = now
				w.printf("migrate %s: %s\n", p.Migration, progressLine(p))
			}
		},
		Planned: func(m, change string) { w.printf("migrate %s: would change %s\n", m, change) },
	}
	for _, m := range migrations.All() {
		w.printf("migration %s (release %s, table %s): %s\n", m.Name, m.Release, t.Tables[m.Table], m.Summary)
	}
	rep, err := migrations.Run(ctx, cfg)
	if err != nil {
		return err
	}
	switch {
	case *dryRun && rep.Changed() > 0:
		return fmt.Errorf("%w: a run would change %d items (dry run: nothing changed)", target.ErrIncomplete, rep.Changed())
	case *dryRun:
		w.printf("migrate: dry run: nothing to change\n")
	case rep.Left() > 0:
		return fmt.Errorf("%w: %d items still cancelled by contention after every try; run make migrate again", target.ErrIncomplete, rep.Left())
	default:
		w.printf("migrate: every migration done (%d items changed by this run)\n", rep.Changed())
	}
	return nil
}

// progressLine is one migration's progress: items scanned of the table's
// estimate, items changed, rate and time left.
func progressLine(p migrations.Progress) string {
	line := fmt.Sprintf("%d items scanned", p.Scanned)
	if p.Estimate > 0 {
		line = fmt.Sprintf("%d of about %d items scanned", p.Scanned, max(p.Estimate, p.Scanned))
	}
	line += fmt.Sprintf(", %d changed", p.Changed)
	if p.Left > 0 {
		line += fmt.Sprintf(", %d left by contention", p.Left)
	}
	if secs := p.Elapsed.Seconds(); secs > 0 {
		r := float64(p.ThisRun) / secs
		line += fmt.Sprintf(", %.0f items/s", r)
		if !p.Done && r > 0 && p.Estimate > p.Scanned {
			line += fmt.Sprintf(", ETA %s", time.Duration(float64(p.Estimate-p.Scanned)/r*float64(time.Second)).Round(time.Second))
		}
	}
	if p.Done {
		line += ", done"
	}
	return line
}

// lineWriter writes whole lines to out one at a time.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func (w *lineWriter) printf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.out, format, args...)
}
