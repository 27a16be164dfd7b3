package state

import (
	"encoding/json"
	"reflect"
	"testing"
)

// checkScanDocument fails when scanDocument accepts data and reads it
// otherwise than json.Unmarshal does.
func checkScanDocument(t *testing.T, data []byte) bool {
	t.Helper()
	var got, want wireState
	if !scanDocument(data, &got) {
		return false
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("scanDocument accepted what json.Unmarshal refuses (%v):\n%s", err, data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scanDocument read\n%#v\njson.Unmarshal\n%#v\nfrom\n%s", got, want, data)
	}
	return true
}

var scanDocuments = []string{
	`{"format_version":1,"serial":1,"lineage":"l","resources":[{"mode":"data","type":"t","name":"n","provider":"p","instances":[{"index_key":"k","attributes":null}]}]}`,
	`{"format_version":1,"pond_version":"0.1.0","serial":18446744073709551615,"lineage":"l\u00e9\n","outputs":{"o":{"value":{"a":[1,2.5e3,"x\"y",true,false,null]},"type":"string","sensitive":true,"hash":"h"}},"resources":[]}`,
	`{"format_version":1,"serial":1,"lineage":"l","resources":[{"mode":"managed","type":"pool","name":"w","provider":"provider.local","instances":[{"index_key":3,"schema_version":2,"attributes":{"a":{"b":[]},"a":1},"sensitive_attributes":[],"sensitive_values":{"p":"h","p":"i"},"dependencies":["pool.x"],"status":"tainted","create_before_destroy":true}]}]}`,
	`{"format_version":1,"serial":1,"lineage":"l","outputs":{}}`,
	` {"serial" : 1 , "lineage":"l" } `,
	`{"format_version":1.5}`, `{"format_version":-1}`, `{"serial":-1}`, `{"format_version":null}`, `{"Serial":1}`, `{"other":1}`,
	`{"serial":1,"serial":2}`, `{"outputs":{"o":{},"o":{}}}`, `{"lineage":"\x01"}`, `{"lineage":"\xff"}`, `{"lineage":"\u12"}`, `{"lineage":"\q"}`,
	`{"resources":[{"instances":[{"attributes":{"s":"\u12"}}]}]}`, `{"resources":[{"instances":[{"attributes":{"s":"\/\b"}}]}]}`,
	`{"resources":[{"instances":[{"attributes":[01]}]}]}`, `{"resources":[{"instances":[{"index_key":1e400}]}]}`, `{"resources":[{"instances":[{"index_key":true}]}]}`,
	`{"resources":[null]}`, `{} x`, `{"serial":1,}`, `[`,
}

// TestScanDocument checks the direct reader of state documents against
// encoding/json, and that it reads what Encode writes.
func TestScanDocument(t *testing.T) {
	for _, doc := range scanDocuments {
		checkScanDocument(t, []byte(doc))
	}
	for _, s := range []*State{sample(), bigState(50)} {
		data, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if !checkScanDocument(t, data) {
			t.Fatalf("scanDocument left an encoded state to encoding/json:\n%s", data)
		}
	}
	for _, doc := range []string{`{"format_version":1.5}`, `{"Serial":1}`, `{"serial":1,"serial":2}`, `{"lineage":"\u12"}`, `{"resources":[{"instances":[{"attributes":[01]}]}]}`, `{} x`} {
		var w wireState
		if scanDocument([]byte(doc), &w) {
			t.Errorf("scanDocument accepted %s", doc)
		}
	}
}

func FuzzScanDocument(f *testing.F) {
	for _, doc := range scanDocuments {
		f.Add([]byte(doc))
	}
	f.Add([]byte(validDoc))
	f.Add([]byte(sampleEncoded))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanDocument(t, data)
	})
}
