package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestFlows(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"flow 1: A made a value on B and fetched it: 3", "flow 2: A passed its RRef to the owner B, which doubled it: 6",
		"flow 4: A passed its RRef to the user C, which doubled it: 6", "flow 3: the owner B passed its RRef to C, which doubled it: 42", "nothing leaked"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
