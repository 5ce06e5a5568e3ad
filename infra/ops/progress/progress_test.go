package progress

import (
	"bytes"
	"regexp"
	"testing"
	"time"
)

func TestMeterLines(t *testing.T) {
	for _, tt := range []struct {
		name string
		do   func(m *Meter)
		want string
	}{
		{"nothing counted, final", func(m *Meter) { m.Stop() }, ``},
		{"nothing counted, periodic", func(m *Meter) { m.print(false); m.Stop() }, `^audit: nothing counted yet \(\d+m?s\)\n$`},
		{"counts", func(m *Meter) { m.Add("users read", 3); m.Add("orders read", 2); m.Stop() }, `^audit: orders read 2, users read 3 \(\d+m?s\)\n$`},
		{"note", func(m *Meter) { m.Note("settling %s", "5s"); m.Stop() }, `^audit: settling 5s \(\d+m?s\)\n$`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			m := Start(&out, "audit", time.Hour)
			tt.do(m)
			if !regexp.MustCompile(tt.want).MatchString(out.String()) || (tt.want == "" && out.Len() > 0) {
				t.Errorf("got %q, want %s", out.String(), tt.want)
			}
		})
	}
}
