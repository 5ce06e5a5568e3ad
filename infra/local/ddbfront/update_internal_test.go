package ddbfront

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/capacity"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// The item after an update, as the front computes it to charge the larger
// of before and after; checked by its size, which is what is charged.
func TestApplyUpdate(t *testing.T) {
	key := map[string]types.AttributeValue{"pk": s("a")}
	before := map[string]types.AttributeValue{"pk": s("a"), "n": n("5"), "body": s("xxxxxxxxxx"),
		"tags": &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"m":    &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{n("1")}}}}}
	for _, tc := range []struct {
		name, expr string
		before     map[string]types.AttributeValue
		values     map[string]types.AttributeValue
		want       map[string]types.AttributeValue
	}{
		{"upsert", "SET body = :b", nil, map[string]types.AttributeValue{":b": s("yy")}, map[string]types.AttributeValue{"pk": s("a"), "body": s("yy")}},
		{"counter", "SET #n = if_not_exists(#n, :z) + :one REMOVE body", before, map[string]types.AttributeValue{":z": n("0"), ":one": n("1")},
			map[string]types.AttributeValue{"pk": s("a"), "n": n("6"), "tags": before["tags"], "m": before["m"]}},
		{"add and delete", "ADD n :d, fresh :d DELETE tags :t", before, map[string]types.AttributeValue{":d": n("-2.5"), ":t": &types.AttributeValueMemberSS{Value: []string{"a"}}},
			map[string]types.AttributeValue{"pk": s("a"), "n": n("2.5"), "fresh": n("-2.5"), "body": before["body"], "tags": &types.AttributeValueMemberSS{Value: []string{"b"}}, "m": before["m"]}},
		{"nested", "set m.l[1] = :v, m.l = list_append(m.l, :l)", before, map[string]types.AttributeValue{":v": n("2"), ":l": &types.AttributeValueMemberL{Value: []types.AttributeValue{n("3")}}},
			// Values come from the item before: the list_append sees [1].
			map[string]types.AttributeValue{"pk": s("a"), "n": n("5"), "body": before["body"], "tags": before["tags"],
				"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{n("1"), n("3")}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			actions, err := parseUpdate(tc.expr, map[string]string{"#n": "n"}, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			got, err := applyUpdate(tc.before, key, actions)
			if err != nil {
				t.Fatal(err)
			}
			if capacity.ItemSize(got) != capacity.ItemSize(tc.want) {
				t.Errorf("size: got %d, want %d (%v)", capacity.ItemSize(got), capacity.ItemSize(tc.want), got)
			}
		})
	}
	if _, err := parseUpdate("SET a = size(b)", nil, nil); err == nil {
		t.Errorf("an unknown function: got no error, want one (the write is then settled once written)")
	}
}

func TestParseStatement(t *testing.T) {
	params := []types.AttributeValue{s("p1"), n("7")}
	for _, tc := range []struct {
		stmt  string
		kind  string
		equal map[string]types.AttributeValue
		item  map[string]types.AttributeValue
	}{
		{`SELECT pk FROM "t" WHERE pk = ? AND attribute_not_exists(body)`, "SELECT", map[string]types.AttributeValue{"pk": s("p1")}, nil},
		{`select * from "t"."ix" where "cat" = 'x' or pk = ?`, "SELECT", map[string]types.AttributeValue{}, nil},
		{`UPDATE "t" SET a = a + 1 SET b = ? WHERE pk = 'k' AND sk = 3`, "UPDATE", map[string]types.AttributeValue{"pk": s("k"), "sk": n("3")}, nil},
		{`DELETE FROM t WHERE sk = ? AND pk = ?`, "DELETE", map[string]types.AttributeValue{"sk": s("p1"), "pk": n("7")}, nil},
		{`INSERT INTO "t" VALUE {'pk': ?, 'sk': ?, 'tags': <<'a','b'>>, 'l': [1, {'x': true}]}`, "INSERT", nil, map[string]types.AttributeValue{
			"pk": s("p1"), "sk": n("7"), "tags": &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
			"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{n("1"), &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": &types.AttributeValueMemberBOOL{Value: true}}}}}}},
	} {
		st, err := parseStatement(tc.stmt, params)
		if err != nil {
			t.Errorf("%s: %v", tc.stmt, err)
			continue
		}
		if st.kind != tc.kind || st.table != "t" {
			t.Errorf("%s: got %s %s, want %s t", tc.stmt, st.kind, st.table, tc.kind)
		}
		if capacity.ItemSize(st.equal) != capacity.ItemSize(tc.equal) || len(st.equal) != len(tc.equal) {
			t.Errorf("%s: equalities got %v, want %v", tc.stmt, st.equal, tc.equal)
		}
		if capacity.ItemSize(st.item) != capacity.ItemSize(tc.item) || len(st.item) != len(tc.item) {
			t.Errorf("%s: item got %v, want %v", tc.stmt, st.item, tc.item)
		}
	}
}
