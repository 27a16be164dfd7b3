package member

import (
	"maps"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
)

func TestStamps(t *testing.T) {
	tests := []struct {
		name string
		m    *api.Membership
		want map[string]string
	}{
		{name: "free", m: nil, want: nil},
		{name: "declared pond", m: &api.Membership{Invitation: api.Invitation{Pond: "pond.burst", PondID: "id-1",
			Attributes: map[string]string{"Project": `"burst-demo"`, "Priority": "3"}}},
			want: map[string]string{"PondName": `"pond.burst"`, "PondID": `"id-1"`, "Project": `"burst-demo"`, "Priority": "3"}},
		{name: "policy pond with its jobs", m: &api.Membership{Invitation: api.Invitation{Pond: "submit-0.policy-1", PondID: "id-2",
			JobIDs: []string{"1.0", "1.1"}, Attributes: map[string]string{"PondPolicy": `"submit-0"`}}},
			want: map[string]string{"PondName": `"submit-0.policy-1"`, "PondID": `"id-2"`, "PondJobIds": `"1.0,1.1"`, "PondPolicy": `"submit-0"`}},
		{name: "bad names dropped, bare text quoted", m: &api.Membership{Invitation: api.Invitation{Pond: "p", PondID: "i",
			Attributes: map[string]string{"1bad": "1", "Note": "two words"}}},
			want: map[string]string{"PondName": `"p"`, "PondID": `"i"`, "Note": `"two words"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Stamps(tt.m); !maps.Equal(got, tt.want) {
				t.Fatalf("stamps %v, want %v", got, tt.want)
			}
		})
	}
}
