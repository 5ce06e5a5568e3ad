package cfntemplate_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/shared/cfntemplate"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       map[string]any
	}{
		{"plain values", "A: x\nB: 3\nC: [true, 1.5]\n",
			map[string]any{"A": "x", "B": 3, "C": []any{true, 1.5}}},
		{"short tags to long forms", "A: !Ref Stage\nB: !Sub 'shopstream-${Stage}'\nC: !GetAtt Table.Arn\nD: !Condition IsProd\nE: !Join [',', [a, b]]\n",
			map[string]any{
				"A": map[string]any{"Ref": "Stage"},
				"B": map[string]any{"Fn::Sub": "shopstream-${Stage}"},
				"C": map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}},
				"D": map[string]any{"Condition": "IsProd"},
				"E": map[string]any{"Fn::Join": []any{",", []any{"a", "b"}}},
			}},
		{"a number under a short tag stays a string", "A: !Ref 10\n",
			map[string]any{"A": map[string]any{"Ref": "10"}}},
		{"aliases", "A: &x {B: 1}\nC: *x\n",
			map[string]any{"A": map[string]any{"B": 1}, "C": map[string]any{"B": 1}}},
		{"JSON", `{"A": {"Ref": "Stage"}}`,
			map[string]any{"A": map[string]any{"Ref": "Stage"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cfntemplate.Decode([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"", "- a\n- b\n", "A: [\n"} {
		if _, err := cfntemplate.Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q): got no error, want one", bad)
		}
	}
}
